package e2e

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
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
var _ = Describe("Services across clusters", Ordered, Serial, Label("disruptive", "real-nodes", "dns"), func() {
	const ns = "mcs"

	BeforeAll(func(ctx SpecContext) {
		flatRealNodes(ctx, ns)
		for _, c := range bed.Secondaries {
			prepareNamespace(ctx, c, ns) // the client pods' default ServiceAccount
		}
		// Before the namespace goes everywhere (registered after it, so run first): what the
		// specs made in the secondaries is the users', which Flotilla leaves where it is.
		DeferCleanup(func(ctx SpecContext) {
			for _, c := range bed.Secondaries {
				cl := clientOf(c)
				Expect(cl.DeleteAllOf(ctx, &mcsv1beta1.ServiceExport{}, client.InNamespace(ns))).To(Succeed())
				Expect(cl.DeleteAllOf(ctx, &appsv1.Deployment{}, client.InNamespace(ns))).To(Succeed())
				Expect(cl.DeleteAllOf(ctx, &appsv1.StatefulSet{}, client.InNamespace(ns))).To(Succeed())
				svcs, err := c.Clientset.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
				Expect(err).NotTo(HaveOccurred())
				for _, svc := range svcs.Items {
					if svc.Labels[flotillav1.LabelPrimary] == "" {
						Expect(client.IgnoreNotFound(cl.Delete(ctx, &svc))).To(Succeed())
					}
				}
			}
		})
	})

	// export makes a Service of the app's pods (port 8080, named http unless told) and its
	// ServiceExport in a cluster.
	export := func(ctx SpecContext, c *testbed.Cluster, name string, port int32, portName string) {
		_, err := c.Clientset.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{
				{Name: portName, Port: port, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(clientOf(c).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
	}
	// deploy runs replicas of the application on a cluster's real node; elected into a
	// secondary when cluster is set (in the primary).
	deploy := func(ctx SpecContext, c *testbed.Cluster, name, cluster string) {
		sel := map[string]string{"app": name}
		tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: onRealNode(appContainer("web", nil))}
		if cluster != "" {
			tpl.Annotations = map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: cluster}
		}
		one := int32(1)
		_, err := c.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: tpl}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
	importIn := func(g Gomega, ctx SpecContext, c *testbed.Cluster, name string) *mcsv1beta1.ServiceImport {
		var imp mcsv1beta1.ServiceImport
		g.Expect(clientOf(c).Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &imp)).To(Succeed(), "no ServiceImport %s in %s", name, c.Name)
		return &imp
	}
	// endpointsIn are the addresses of the import's EndpointSlices in a cluster, per source cluster.
	endpointsIn := func(g Gomega, ctx SpecContext, c *testbed.Cluster, name string) map[string][]string {
		slices, err := c.Clientset.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName + "=" + name})
		g.Expect(err).NotTo(HaveOccurred())
		out := map[string][]string{}
		for _, s := range slices.Items {
			g.Expect(s.Labels).To(HaveKeyWithValue(discoveryv1.LabelManagedBy, mcs.ManagedBy))
			for _, e := range s.Endpoints {
				out[s.Labels[mcsv1beta1.LabelSourceCluster]] = append(out[s.Labels[mcsv1beta1.LabelSourceCluster]], e.Addresses...)
			}
		}
		return out
	}
	exportCondition := func(g Gomega, ctx SpecContext, c *testbed.Cluster, name string, t mcsv1beta1.ServiceExportConditionType) metav1.Condition {
		var e mcsv1beta1.ServiceExport
		g.Expect(clientOf(c).Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &e)).To(Succeed())
		for _, cond := range e.Status.Conditions {
			if cond.Type == string(t) {
				return cond
			}
		}
		g.Expect(e.Status.Conditions).To(ContainElement(HaveField("Type", string(t))), "export %s in %s", name, c.Name)
		return metav1.Condition{}
	}
	// answers calls the url n times from a pod on a cluster's real node and returns the answers.
	answers := func(g Gomega, ctx SpecContext, c *testbed.Cluster, url string, n int) string {
		return runInCluster(g, ctx, c, ns, fmt.Sprintf("client-%d", time.Now().UnixNano()%1000000), strings.Repeat("wget -qO- "+url+"; ", n))
	}

	It("imports an elected backend exported in the primary into every cluster: a client in secondary1 reaches it in secondary2 at the import's address", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		deploy(ctx, bed.Primary, "backend", s2.Name)
		start := time.Now()
		export(ctx, bed.Primary, "backend", 8080, "http")
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
				imp := importIn(g, ctx, c, "backend")
				g.Expect(imp.Spec.Type).To(Equal(mcsv1beta1.ClusterSetIP))
				g.Expect(imp.Spec.IPs).NotTo(BeEmpty())
				g.Expect(imp.Spec.IPFamilies).To(HaveLen(len(imp.Spec.IPs)), "one family per address, in order")
				g.Expect(imp.Spec.Ports).To(Equal([]mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080}}))
				g.Expect(imp.Status.Clusters).To(Equal([]mcsv1beta1.ClusterStatus{{Cluster: "primary"}}))
				g.Expect(endpointsIn(g, ctx, c, "backend")).To(Equal(map[string][]string{"primary": {delegateIP}}),
					"the elected backend's delegate address is the primary's endpoint, in %s", c.Name)
			}
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		AddReportEntry("exported backend imported in every cluster", time.Since(start).Round(100*time.Millisecond).String())
		Eventually(func(g Gomega) {
			g.Expect(exportCondition(g, ctx, bed.Primary, "backend", mcsv1beta1.ServiceExportConditionValid).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(exportCondition(g, ctx, bed.Primary, "backend", mcsv1beta1.ServiceExportConditionReady).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(exportCondition(g, ctx, bed.Primary, "backend", mcsv1beta1.ServiceExportConditionConflict).Status).To(Equal(metav1.ConditionFalse))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		var ip string
		Eventually(func(g Gomega) { ip = importIn(g, ctx, s1, "backend").Spec.IPs[0] }).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			out := answers(g, ctx, s1, fmt.Sprintf("http://%s:8080/", ip), 3)
			g.Expect(strings.Count(out, "pod=backend-")).To(Equal(3), "a client in %s calling the import's address %s: %s", s1.Name, ip, out)
			out = answers(g, ctx, s1, "http://backend."+ns+".svc.clusterset.local:8080/", 3)
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
				g.Expect(endpointsIn(g, ctx, c, "backend")).To(BeEmpty())
				_, err = c.Clientset.CoreV1().Services(ns).Get(ctx, mcs.DerivedServiceName("backend"), metav1.GetOptions{})
				g.Expect(err).To(HaveOccurred(), "the import's Service is still in %s", c.Name)
			}
		}).WithContext(ctx).WithTimeout(20 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		AddReportEntry("unexported: gone from every cluster", time.Since(start).Round(100*time.Millisecond).String())
	})

	It("withdraws a stopped secondary's endpoints from every import within the failover bound while the primary's keep answering, keeps its export through a manager restart, and brings them back when it answers again", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		// The same name exported by the primary (a plain Deployment on its real node) and by
		// secondary2 (a Deployment of its own there).
		deploy(ctx, bed.Primary, "echo", "")
		export(ctx, bed.Primary, "echo", 8080, "http")
		deploy(ctx, s2, "echo", "")
		export(ctx, s2, "echo", 8080, "http")
		Eventually(func(g Gomega) {
			for _, c := range bed.Clusters() {
				got := endpointsIn(g, ctx, c, "echo")
				g.Expect(got).To(HaveKey("primary"))
				g.Expect(got).To(HaveKey(s2.Name))
				g.Expect(importIn(g, ctx, c, "echo").Status.Clusters).To(ConsistOf(
					mcsv1beta1.ClusterStatus{Cluster: "primary"}, mcsv1beta1.ClusterStatus{Cluster: s2.Name}))
			}
			g.Expect(exportCondition(g, ctx, s2, "echo", mcsv1beta1.ServiceExportConditionReady).Status).To(Equal(metav1.ConditionTrue))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		var ip string
		Eventually(func(g Gomega) { ip = importIn(g, ctx, s1, "echo").Spec.IPs[0] }).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			out := answers(g, ctx, s1, fmt.Sprintf("http://%s:8080/", ip), 20)
			g.Expect(out).To(ContainSubstring("node="+testbed.RealNodeName), "the primary's backend answers: %s", out)
			g.Expect(out).To(ContainSubstring("node="+s2.RealNode.Name), "secondary2's backend answers: %s", out)
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(2 * time.Second).Should(Succeed())

		startAgain := stopForSpec(ctx, s2)
		stopped := time.Now()
		Eventually(func(g Gomega) {
			for _, c := range []*testbed.Cluster{bed.Primary, s1} {
				got := endpointsIn(g, ctx, c, "echo")
				g.Expect(got).NotTo(HaveKey(s2.Name), "the stopped cluster's endpoints still in %s", c.Name)
				g.Expect(got).To(HaveKey("primary"))
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		withdrawn := time.Since(stopped)
		AddReportEntry("stopped secondary's endpoints withdrawn (failover-after 5s)", withdrawn.Round(100*time.Millisecond).String())
		out := ""
		Eventually(func(g Gomega) { out = answers(g, ctx, s1, fmt.Sprintf("http://%s:8080/", ip), 10) }).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		Expect(strings.Count(out, "node="+testbed.RealNodeName)).To(Equal(10), "every call answered by the primary's backend: %s", out)
		// Kept in the import's clusters: the export is not lost, its cluster only silent; not even
		// by a manager that restarts meanwhile and cannot read that cluster.
		Expect(importIn(Default, ctx, s1, "echo").Status.Clusters).To(ContainElement(mcsv1beta1.ClusterStatus{Cluster: s2.Name}))
		restartManager(ctx, "--pod-network=flat")
		Consistently(func(g Gomega) {
			for _, c := range []*testbed.Cluster{bed.Primary, s1} {
				imp := importIn(g, ctx, c, "echo")
				g.Expect(imp.Status.Clusters).To(ContainElement(mcsv1beta1.ClusterStatus{Cluster: s2.Name}), "in %s", c.Name)
				g.Expect(endpointsIn(g, ctx, c, "echo")).To(HaveKey("primary"))
			}
		}).WithContext(ctx).WithTimeout(10 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

		startAgain(ctx)
		Eventually(func(g Gomega) {
			g.Expect(endpointsIn(g, ctx, s1, "echo")).To(HaveKey(s2.Name))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	})

	It("imports only the exporting clusters' endpoints, and sends each port of the import only to the clusters that expose it", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		// The same Service in the primary and in secondary2, exported by the primary only.
		deploy(ctx, bed.Primary, "dual", "")
		export(ctx, bed.Primary, "dual", 8080, "http")
		deploy(ctx, s2, "dual", "")
		_, err := s2.Clientset.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "dual"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "dual"}, Ports: []corev1.ServicePort{
				{Name: "other", Port: 9090, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		var ip string
		Eventually(func(g Gomega) {
			imp := importIn(g, ctx, s1, "dual")
			g.Expect(imp.Spec.IPs).NotTo(BeEmpty())
			ip = imp.Spec.IPs[0]
			g.Expect(endpointsIn(g, ctx, s1, "dual")).To(HaveKey("primary"))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			out := answers(g, ctx, s1, fmt.Sprintf("http://%s:8080/", ip), 10)
			g.Expect(strings.Count(out, "node="+testbed.RealNodeName)).To(Equal(10), "only the exporting cluster answers: %s", out)
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(2 * time.Second).Should(Succeed())

		// secondary2 exports it too, with a port of another name: each port reaches only the
		// cluster that exposes it.
		Expect(clientOf(s2).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dual"}})).To(Succeed())
		Eventually(func(g Gomega) {
			imp := importIn(g, ctx, s1, "dual")
			g.Expect(imp.Spec.Ports).To(ConsistOf(
				mcsv1beta1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080},
				mcsv1beta1.ServicePort{Name: "other", Protocol: corev1.ProtocolTCP, Port: 9090}))
			g.Expect(endpointsIn(g, ctx, s1, "dual")).To(HaveKey(s2.Name))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			out := answers(g, ctx, s1, fmt.Sprintf("http://%s:8080/", ip), 10)
			g.Expect(strings.Count(out, "node="+testbed.RealNodeName)).To(Equal(10), "port 8080 reaches only the primary: %s", out)
			out = answers(g, ctx, s1, fmt.Sprintf("http://%s:9090/", ip), 10)
			g.Expect(strings.Count(out, "node="+s2.RealNode.Name)).To(Equal(10), "port 9090 reaches only secondary2: %s", out)
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
	})

	It("resolves <service>.<namespace>.svc.clusterset.local in every cluster: a ClusterSetIP import to its address (one SRV record), a headless one to its ready endpoints and each endpoint by <hostname>.<cluster>; cluster.local as before; a name not exported nowhere", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		deploy(ctx, bed.Primary, "named", "")
		export(ctx, bed.Primary, "named", 8080, "http")
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
				g.Expect(importIn(g, ctx, c, "named").Spec.IPs).NotTo(BeEmpty())
				g.Expect(importIn(g, ctx, c, "hs").Spec.Type).To(Equal(mcsv1beta1.Headless))
				g.Expect(endpointsIn(g, ctx, c, "hs")[s2.Name]).To(HaveLen(2))
			}
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

		zone := ns + ".svc.clusterset.local"
		for _, c := range bed.Clusters() {
			Eventually(func(g Gomega) {
				ip := importIn(g, ctx, c, "named").Spec.IPs[0]
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
			out = answers(g, ctx, s1, "http://named."+zone+":8080/", 3)
			g.Expect(strings.Count(out, "node="+testbed.RealNodeName)).To(Equal(3), "by its clusterset.local name from %s: %s", s1.Name, out)
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
	})

	It("raises Conflict on both exports when their ports contradict: the older export's port is the import's, and both say why", func(ctx SpecContext) {
		s1 := bed.Secondaries[0]
		export(ctx, bed.Primary, "clash", 80, "web")
		Eventually(func(g Gomega) { importIn(g, ctx, s1, "clash") }).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		time.Sleep(1100 * time.Millisecond) // creation times have a one-second granularity
		export(ctx, s1, "clash", 81, "web")
		Eventually(func(g Gomega) {
			for _, c := range []*testbed.Cluster{bed.Primary, s1} {
				cond := exportCondition(g, ctx, c, "clash", mcsv1beta1.ServiceExportConditionConflict)
				g.Expect(cond.Status).To(Equal(metav1.ConditionTrue), "in %s", c.Name)
				g.Expect(cond.Reason).To(Equal(string(mcsv1beta1.ServiceExportReasonPortConflict)))
				g.Expect(cond.Message).To(ContainSubstring("the oldest export (cluster primary"))
			}
			for _, c := range bed.Clusters() {
				g.Expect(importIn(g, ctx, c, "clash").Spec.Ports).To(Equal([]mcsv1beta1.ServicePort{{Name: "web", Protocol: corev1.ProtocolTCP, Port: 80}}))
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		// An export of a name without a Service: not valid, and it says so.
		Expect(clientOf(s1).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nothing"}})).To(Succeed())
		Eventually(func(g Gomega) {
			cond := exportCondition(g, ctx, s1, "nothing", mcsv1beta1.ServiceExportConditionValid)
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
