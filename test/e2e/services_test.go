package e2e

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/mcs"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// Services across clusters, on real containers and the flat pod network: the Multi-Cluster
// Services API with Flotilla as the ClusterSet's controller (the primary and its secondaries).
// Each group has a namespace of its own; the one that stops a secondary runs alone.
var _ = Describe("Services across clusters", Ordered, Label("real-nodes", "dns"), func() {
	const ns = "mcs"
	f := mcsFixture{ns: ns}
	BeforeAll(func(ctx SpecContext) { f.setUp(ctx) })

	It("imports an elected backend exported in the primary into every cluster: a client in secondary1 reaches it in secondary2 at the import's address", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		f.deploy(ctx, bed.Primary, "backend", s2.Name)
		start := time.Now()
		f.export(ctx, bed.Primary, "backend", 8080, "http")
		var delegateIP string
		Eventually(func(g Gomega) {
			pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=backend"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(HaveLen(1))
			g.Expect(pods.Items[0].Spec.NodeName).To(Equal(flotillav1.VirtualNodeName(s2.Name)))
			g.Expect(pods.Items[0].Status.PodIP).NotTo(BeEmpty())
			delegateIP = pods.Items[0].Status.PodIP
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			for _, c := range bed.Clusters() {
				imp := f.importIn(g, ctx, c, "backend")
				g.Expect(imp.Spec.Type).To(Equal(mcsv1beta1.ClusterSetIP))
				g.Expect(imp.Spec.IPs).NotTo(BeEmpty())
				g.Expect(imp.Spec.IPFamilies).To(HaveLen(len(imp.Spec.IPs)), "one family per address, in order")
				g.Expect(imp.Spec.Ports).To(Equal([]mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080}}))
				g.Expect(imp.Status.Clusters).To(Equal([]mcsv1beta1.ClusterStatus{{Cluster: "primary"}}))
				g.Expect(f.endpointsIn(g, ctx, c, "backend")).To(Equal(map[string][]string{"primary": {delegateIP}}),
					"the elected backend's delegate address is the primary's endpoint, in %s", c.Name)
			}
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		AddReportEntry("exported backend imported in every cluster", time.Since(start).Round(100*time.Millisecond).String())
		Eventually(func(g Gomega) {
			g.Expect(f.exportCondition(g, ctx, bed.Primary, "backend", mcsv1beta1.ServiceExportConditionValid).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(f.exportCondition(g, ctx, bed.Primary, "backend", mcsv1beta1.ServiceExportConditionReady).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(f.exportCondition(g, ctx, bed.Primary, "backend", mcsv1beta1.ServiceExportConditionConflict).Status).To(Equal(metav1.ConditionFalse))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		var ip string
		Eventually(func(g Gomega) { ip = f.importIn(g, ctx, s1, "backend").Spec.IPs[0] }).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			out := f.answers(g, ctx, s1, fmt.Sprintf("http://%s:8080/", ip), 3)
			g.Expect(strings.Count(out, "pod=backend-")).To(Equal(3), "a client in %s calling the import's address %s: %s", s1.Name, ip, out)
			out = f.answers(g, ctx, s1, "http://backend."+ns+".svc.clusterset.local:8080/", 3)
			g.Expect(strings.Count(out, "pod=backend-")).To(Equal(3), "a client in %s calling backend.%s.svc.clusterset.local: %s", s1.Name, ns, out)
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(2 * time.Second).Should(Succeed())

		// Unexported: the import and its EndpointSlices leave every cluster.
		Expect(clientOf(bed.Primary).Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backend"}})).To(Succeed())
		start = time.Now()
		Eventually(func(g Gomega) {
			for _, c := range bed.Clusters() {
				var imp mcsv1beta1.ServiceImport
				err := clientOf(c).Get(ctx, client.ObjectKey{Namespace: ns, Name: "backend"}, &imp)
				g.Expect(err).To(HaveOccurred(), "the import is still in %s", c.Name)
				g.Expect(f.endpointsIn(g, ctx, c, "backend")).To(BeEmpty())
				_, err = c.Clientset.CoreV1().Services(ns).Get(ctx, mcs.DerivedServiceName("backend"), metav1.GetOptions{})
				g.Expect(err).To(HaveOccurred(), "the import's Service is still in %s", c.Name)
			}
		}).WithContext(ctx).WithTimeout(20 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		AddReportEntry("unexported: gone from every cluster", time.Since(start).Round(100*time.Millisecond).String())
	})

	It("imports only the exporting clusters' endpoints, and sends each port of the import only to the clusters that expose it", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		// The same Service in the primary and in secondary2, exported by the primary only.
		f.deploy(ctx, bed.Primary, "dual", "")
		f.export(ctx, bed.Primary, "dual", 8080, "http")
		f.deploy(ctx, s2, "dual", "")
		_, err := s2.Clientset.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "dual"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "dual"}, Ports: []corev1.ServicePort{
				{Name: "other", Port: 9090, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		var ip string
		Eventually(func(g Gomega) {
			imp := f.importIn(g, ctx, s1, "dual")
			g.Expect(imp.Spec.IPs).NotTo(BeEmpty())
			ip = imp.Spec.IPs[0]
			g.Expect(f.endpointsIn(g, ctx, s1, "dual")).To(HaveKey("primary"))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			out := f.answers(g, ctx, s1, fmt.Sprintf("http://%s:8080/", ip), 10)
			g.Expect(strings.Count(out, "node="+testbed.RealNodeName)).To(Equal(10), "only the exporting cluster answers: %s", out)
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(2 * time.Second).Should(Succeed())

		// secondary2 exports it too, with a port of another name: each port reaches only the
		// cluster that exposes it.
		Expect(clientOf(s2).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dual"}})).To(Succeed())
		Eventually(func(g Gomega) {
			imp := f.importIn(g, ctx, s1, "dual")
			g.Expect(imp.Spec.Ports).To(ConsistOf(
				mcsv1beta1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080},
				mcsv1beta1.ServicePort{Name: "other", Protocol: corev1.ProtocolTCP, Port: 9090}))
			g.Expect(f.endpointsIn(g, ctx, s1, "dual")).To(HaveKey(s2.Name))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			out := f.answers(g, ctx, s1, fmt.Sprintf("http://%s:8080/", ip), 10)
			g.Expect(strings.Count(out, "node="+testbed.RealNodeName)).To(Equal(10), "port 8080 reaches only the primary: %s", out)
			out = f.answers(g, ctx, s1, fmt.Sprintf("http://%s:9090/", ip), 10)
			g.Expect(strings.Count(out, "node="+s2.RealNode.Name)).To(Equal(10), "port 9090 reaches only secondary2: %s", out)
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
	})

	It("resolves <service>.<namespace>.svc.clusterset.local in every cluster: a ClusterSetIP import to its address (one SRV record), a headless one to its ready endpoints and each endpoint by <hostname>.<cluster>; cluster.local as before; a name not exported nowhere", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		f.deploy(ctx, bed.Primary, "named", "")
		f.export(ctx, bed.Primary, "named", 8080, "http")
		local, err := bed.Primary.Clientset.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "private"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "named"}, Ports: []corev1.ServicePort{{Port: 8080}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// A headless StatefulSet of 2 in secondary2, exported there.
		sel := map[string]string{"app": "hs"}
		_, err = s2.Clientset.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hs"},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: sel, Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = s2.Clientset.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "hs"},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(2)), ServiceName: "hs", Selector: &metav1.LabelSelector{MatchLabels: sel},
				PodManagementPolicy: appsv1.ParallelPodManagement,
				Template:            corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: onRealNode(appContainer("web", nil))}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(clientOf(s2).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hs"}})).To(Succeed())
		podIPs := map[string]string{}
		Eventually(func(g Gomega) {
			for _, name := range []string{"hs-0", "hs-1"} {
				p, err := s2.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(p.Status.PodIP).NotTo(BeEmpty())
				podIPs[name] = p.Status.PodIP
			}
			for _, c := range bed.Clusters() {
				g.Expect(f.importIn(g, ctx, c, "named").Spec.IPs).NotTo(BeEmpty())
				g.Expect(f.importIn(g, ctx, c, "hs").Spec.Type).To(Equal(mcsv1beta1.Headless))
				g.Expect(f.endpointsIn(g, ctx, c, "hs")[s2.Name]).To(HaveLen(2))
			}
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

		zone := ns + ".svc.clusterset.local"
		for _, c := range bed.Clusters() {
			Eventually(func(g Gomega) {
				ip := f.importIn(g, ctx, c, "named").Spec.IPs[0]
				out := runInCluster(g, ctx, c, ns, fmt.Sprintf("dns-%d", time.Now().UnixNano()%1000000),
					"nslookup -type=A named."+zone+"; nslookup -type=SRV named."+zone+"; nslookup -type=A hs."+zone+"; "+
						"nslookup -type=A hs-0."+s2.Name+".hs."+zone+"; nslookup -type=SRV hs."+zone+"; nslookup private."+zone)
				g.Expect(out).To(ContainSubstring("Address: "+ip+"\n"), "named in %s: %s", c.Name, out)
				g.Expect(strings.Count(out, " 8080 named."+zone+".")).To(Equal(1), "one SRV record for named, in %s: %s", c.Name, out)
				for name, pip := range podIPs {
					g.Expect(out).To(ContainSubstring("Address: "+pip+"\n"), "hs in %s: %s", c.Name, out)
					g.Expect(out).To(ContainSubstring(" 8080 "+name+"."+s2.Name+".hs."+zone+"."), "hs SRV in %s: %s", c.Name, out)
				}
				g.Expect(strings.Count(out, "Address: "+podIPs["hs-0"]+"\n")).To(Equal(2), "hs-0 by its own name too, in %s: %s", c.Name, out)
				g.Expect(out).To(ContainSubstring("can't find private."+zone), "a name not exported, in %s: %s", c.Name, out)
			}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
		}
		// cluster.local as before, and the name reaches the backend.
		Eventually(func(g Gomega) {
			out := runInCluster(g, ctx, bed.Primary, ns, fmt.Sprintf("dns-%d", time.Now().UnixNano()%1000000), "nslookup -type=A private."+ns+".svc.cluster.local")
			g.Expect(out).To(ContainSubstring("Address: " + local.Spec.ClusterIP + "\n"))
			out = f.answers(g, ctx, s1, "http://named."+zone+":8080/", 3)
			g.Expect(strings.Count(out, "node="+testbed.RealNodeName)).To(Equal(3), "by its clusterset.local name from %s: %s", s1.Name, out)
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
	})

	It("raises Conflict on both exports when their ports contradict: the primary's export's port is the import's, both say why, and the losing one names the port it lost", func(ctx SpecContext) {
		s1 := bed.Secondaries[0]
		f.export(ctx, bed.Primary, "clash", 80, "web")
		Eventually(func(g Gomega) { f.importIn(g, ctx, s1, "clash") }).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		time.Sleep(1100 * time.Millisecond) // creation times have a one-second granularity
		f.export(ctx, s1, "clash", 81, "web")
		Eventually(func(g Gomega) {
			for _, c := range []*testbed.Cluster{bed.Primary, s1} {
				cond := f.exportCondition(g, ctx, c, "clash", mcsv1beta1.ServiceExportConditionConflict)
				g.Expect(cond.Status).To(Equal(metav1.ConditionTrue), "in %s", c.Name)
				g.Expect(cond.Reason).To(Equal(string(mcsv1beta1.ServiceExportReasonPortConflict)))
				g.Expect(cond.Message).To(ContainSubstring("the primary's export (cluster primary) wins"))
			}
			lost := f.exportCondition(g, ctx, s1, "clash", mcsv1beta1.ServiceExportConditionConflict)
			g.Expect(lost.Message).To(ContainSubstring("left out of the import, so this cluster's endpoints serve none of them: web 81/TCP"))
			for _, c := range bed.Clusters() {
				g.Expect(f.importIn(g, ctx, c, "clash").Spec.Ports).To(Equal([]mcsv1beta1.ServicePort{{Name: "web", Protocol: corev1.ProtocolTCP, Port: 80}}))
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		// An export of a name without a Service: not valid, and it says so.
		Expect(clientOf(s1).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nothing"}})).To(Succeed())
		Eventually(func(g Gomega) {
			cond := f.exportCondition(g, ctx, s1, "nothing", mcsv1beta1.ServiceExportConditionValid)
			g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(cond.Reason).To(Equal(string(mcsv1beta1.ServiceExportReasonNoService)))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			for _, c := range bed.Clusters() {
				var imp mcsv1beta1.ServiceImport
				g.Expect(clientOf(c).Get(ctx, client.ObjectKey{Namespace: ns, Name: "nothing"}, &imp)).NotTo(Succeed())
			}
		}).WithContext(ctx).WithTimeout(3 * time.Second).Should(Succeed())
	})
})

var _ = Describe("Services across clusters", Ordered, Serial, Label("disruptive", "real-nodes", "dns"), func() {
	const ns = "mcs-outage"
	f := mcsFixture{ns: ns}
	BeforeAll(func(ctx SpecContext) { f.setUp(ctx) })

	It("withdraws a stopped secondary's endpoints from every import within the failover bound while the primary's keep answering, keeps its export through a manager restart, and brings them back when it answers again", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		// The same name exported by the primary (a plain Deployment on its real node) and by
		// secondary2 (a Deployment of its own there).
		f.deploy(ctx, bed.Primary, "echo", "")
		f.export(ctx, bed.Primary, "echo", 8080, "http")
		f.deploy(ctx, s2, "echo", "")
		f.export(ctx, s2, "echo", 8080, "http")
		Eventually(func(g Gomega) {
			for _, c := range bed.Clusters() {
				got := f.endpointsIn(g, ctx, c, "echo")
				g.Expect(got).To(HaveKey("primary"))
				g.Expect(got).To(HaveKey(s2.Name))
				g.Expect(f.importIn(g, ctx, c, "echo").Status.Clusters).To(ConsistOf(
					mcsv1beta1.ClusterStatus{Cluster: "primary"}, mcsv1beta1.ClusterStatus{Cluster: s2.Name}))
			}
			g.Expect(f.exportCondition(g, ctx, s2, "echo", mcsv1beta1.ServiceExportConditionReady).Status).To(Equal(metav1.ConditionTrue))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		var ip string
		Eventually(func(g Gomega) { ip = f.importIn(g, ctx, s1, "echo").Spec.IPs[0] }).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			out := f.answers(g, ctx, s1, fmt.Sprintf("http://%s:8080/", ip), 20)
			g.Expect(out).To(ContainSubstring("node="+testbed.RealNodeName), "the primary's backend answers: %s", out)
			g.Expect(out).To(ContainSubstring("node="+s2.RealNode.Name), "secondary2's backend answers: %s", out)
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(2 * time.Second).Should(Succeed())

		startAgain := stopForSpec(ctx, s2)
		stopped := time.Now()
		Eventually(func(g Gomega) {
			for _, c := range []*testbed.Cluster{bed.Primary, s1} {
				got := f.endpointsIn(g, ctx, c, "echo")
				g.Expect(got).NotTo(HaveKey(s2.Name), "the stopped cluster's endpoints still in %s", c.Name)
				g.Expect(got).To(HaveKey("primary"))
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		withdrawn := time.Since(stopped)
		AddReportEntry("stopped secondary's endpoints withdrawn (failover-after 5s)", withdrawn.Round(100*time.Millisecond).String())
		out := ""
		Eventually(func(g Gomega) { out = f.answers(g, ctx, s1, fmt.Sprintf("http://%s:8080/", ip), 10) }).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		Expect(strings.Count(out, "node="+testbed.RealNodeName)).To(Equal(10), "every call answered by the primary's backend: %s", out)
		// Kept in the import's clusters: the export is not lost, its cluster only silent; not even
		// by a manager that restarts meanwhile and cannot read that cluster.
		Expect(f.importIn(Default, ctx, s1, "echo").Status.Clusters).To(ContainElement(mcsv1beta1.ClusterStatus{Cluster: s2.Name}))
		restartManager(ctx)
		Consistently(func(g Gomega) {
			for _, c := range []*testbed.Cluster{bed.Primary, s1} {
				imp := f.importIn(g, ctx, c, "echo")
				g.Expect(imp.Status.Clusters).To(ContainElement(mcsv1beta1.ClusterStatus{Cluster: s2.Name}), "in %s", c.Name)
				g.Expect(f.endpointsIn(g, ctx, c, "echo")).To(HaveKey("primary"))
			}
		}).WithContext(ctx).WithTimeout(10 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

		startAgain(ctx)
		Eventually(func(g Gomega) {
			g.Expect(f.endpointsIn(g, ctx, s1, "echo")).To(HaveKey(s2.Name))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	})
})
