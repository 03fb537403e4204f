package e2e

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/mcs"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// The cases of the MCS API's own conformance suite (kubernetes-sigs/mcs-api, conformance/) that
// need no DNS and no connectivity, with its fixtures: a namespace mcs-conformance-<n> made by the
// test in every cluster (not Flotilla's), the Service hello (tcp and udp 42, session affinity
// ClientIP for 10 s, PreferDualStack) of a Deployment hello on the clusters' fake nodes, exported
// in c0 (the primary) and, for the two-cluster cases, in c1 (secondary1) at least a second later.
// Their waits are the suite's: 20 s for an import or a condition, 60 s for EndpointSlices. The
// cases each spec covers are listed in docs/services.md.
var _ = Describe("the MCS conformance suite's cases", Ordered, func() {
	var ns string
	var c0, c1 *testbed.Cluster

	BeforeAll(func(ctx SpecContext) {
		joinBothSecondaries(ctx)
		c0, c1 = bed.Primary, bed.Secondaries[0]
	})
	BeforeEach(func(ctx SpecContext) {
		ns = fmt.Sprintf("mcs-conformance-%d", rand.Uint32())
		for _, c := range bed.Clusters() {
			// A secondary's admin opens the namespace to the primary: only there do its exports
			// count (the suite's one step beyond the upstream cases).
			var labels map[string]string
			if c != bed.Primary {
				labels = map[string]string{flotillav1.LabelManagedBy: primaryID(ctx)}
			}
			_, err := c.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			// Not left to the controller-manager (see prepareNamespace).
			_, err = c.Clientset.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
			if !apierrors.IsAlreadyExists(err) {
				Expect(err).NotTo(HaveOccurred())
			}
		}
		DeferCleanup(func(ctx SpecContext) {
			for _, c := range bed.Clusters() {
				_ = c.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
			}
		})
	})

	hello := func(mut func(*corev1.ServiceSpec)) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hello", Labels: map[string]string{"dummy-svc": "dummy"}, Annotations: map[string]string{"dummy-svc": "dummy"}},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "hello"},
				Ports: []corev1.ServicePort{
					{Name: "tcp", Port: 42, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(42)},
					{Name: "udp", Port: 42, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(42)}},
				SessionAffinity:       corev1.ServiceAffinityClientIP,
				SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(10))}},
				IPFamilyPolicy:        ptr.To(corev1.IPFamilyPolicyPreferDualStack)}}
		if mut != nil {
			mut(&s.Spec)
		}
		return s
	}
	deploy := func(ctx SpecContext, c *testbed.Cluster, svc *corev1.Service) *corev1.Service {
		sel := map[string]string{"app": "hello"}
		_, err := c.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "hello"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: sel},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "hello", Image: "registry.k8s.io/pause:3.10"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		created, err := c.Clientset.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		return created
	}
	export := func(ctx SpecContext, c *testbed.Cluster, mut func(*mcsv1beta1.ServiceExport)) {
		e := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello",
			Labels: map[string]string{"dummy-svcexport": "dummy"}, Annotations: map[string]string{"dummy-svcexport": "dummy"}}}
		if mut != nil {
			mut(e)
		}
		Expect(clientOf(c).Create(ctx, e)).To(Succeed())
	}
	unexport := func(ctx SpecContext, c *testbed.Cluster) {
		Expect(clientOf(c).Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"}})).To(Succeed())
	}
	getImport := func(ctx SpecContext, c *testbed.Cluster) (*mcsv1beta1.ServiceImport, error) {
		var imp mcsv1beta1.ServiceImport
		err := clientOf(c).Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, &imp)
		return &imp, err
	}
	awaitImport := func(ctx SpecContext, c *testbed.Cluster) *mcsv1beta1.ServiceImport {
		var imp *mcsv1beta1.ServiceImport
		Eventually(func() (err error) { imp, err = getImport(ctx, c); return err }).WithContext(ctx).WithTimeout(20*time.Second).WithPolling(100*time.Millisecond).
			Should(Succeed(), "no ServiceImport in %s within 20 s", c.Name)
		return imp
	}
	awaitNoImport := func(ctx SpecContext, c *testbed.Cluster) {
		Eventually(func() bool { _, err := getImport(ctx, c); return apierrors.IsNotFound(err) }).WithContext(ctx).WithTimeout(20*time.Second).WithPolling(100*time.Millisecond).
			Should(BeTrue(), "the ServiceImport still in %s after 20 s", c.Name)
	}
	condition := func(ctx SpecContext, c *testbed.Cluster, t mcsv1beta1.ServiceExportConditionType) func() metav1.ConditionStatus {
		return func() metav1.ConditionStatus {
			var e mcsv1beta1.ServiceExport
			if err := clientOf(c).Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, &e); err != nil {
				return ""
			}
			for _, cond := range e.Status.Conditions {
				if cond.Type == string(t) {
					return cond.Status
				}
			}
			return ""
		}
	}
	ports := func(imp *mcsv1beta1.ServiceImport) []string {
		var out []string
		for _, p := range imp.Spec.Ports {
			out = append(out, fmt.Sprintf("%s %d/%s", p.Name, p.Port, p.Protocol))
		}
		sort.Strings(out)
		return out
	}
	mcsSlices := func(ctx SpecContext, c *testbed.Cluster) []discoveryv1.EndpointSlice {
		list, err := c.Clientset.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
			LabelSelector: mcsv1beta1.LabelServiceName + "," + mcsv1beta1.LabelSourceCluster})
		Expect(err).NotTo(HaveOccurred())
		return list.Items
	}

	It("counts a secondary's export only where its admin opened the namespace to Flotilla, and imports nothing there until then", func(ctx SpecContext) {
		opened := func(open bool) {
			GinkgoHelper()
			n, err := c1.Clientset.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			if open {
				n.Labels[flotillav1.LabelManagedBy] = primaryID(ctx)
			} else {
				delete(n.Labels, flotillav1.LabelManagedBy)
			}
			_, err = c1.Clientset.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		opened(false)
		deploy(ctx, c1, hello(nil))
		export(ctx, c1, nil)
		Consistently(func() bool { _, err := getImport(ctx, c0); return apierrors.IsNotFound(err) }).WithContext(ctx).WithTimeout(5*time.Second).
			Should(BeTrue(), "an import in the primary of an export in a namespace its cluster's admin did not open")
		opened(true)
		awaitImport(ctx, c0)
		// Its status follows its creation.
		Eventually(func(g Gomega) {
			imp, err := getImport(ctx, c0)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(imp.Status.Clusters).To(Equal([]mcsv1beta1.ClusterStatus{{Cluster: c1.Name}}))
		}).WithContext(ctx).WithTimeout(20 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		unexport(ctx, c1)
		awaitNoImport(ctx, c0)
	})

	It("exports a ClusterIP Service: a ClusterSetIP import in every cluster with its ports, affinity, traffic policies and an IP per family in order, only the exported labels and annotations, MCS EndpointSlices everywhere; unexported, all of it goes", func(ctx SpecContext) {
		svc := deploy(ctx, c0, hello(func(s *corev1.ServiceSpec) {
			s.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
			s.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
		}))
		export(ctx, c0, func(e *mcsv1beta1.ServiceExport) {
			e.Spec.ExportedLabels = map[string]string{"dummy-label": "true"}
			e.Spec.ExportedAnnotations = map[string]string{"dummy-annotation": "true"}
		})
		Eventually(condition(ctx, c0, mcsv1beta1.ServiceExportConditionValid)).WithContext(ctx).WithTimeout(20 * time.Second).Should(Equal(metav1.ConditionTrue))
		for _, c := range bed.Clusters() {
			imp := awaitImport(ctx, c)
			Expect(imp.Spec.Type).To(Equal(mcsv1beta1.ClusterSetIP), c.Name)
			Expect(ports(imp)).To(Equal([]string{"tcp 42/TCP", "udp 42/UDP"}), c.Name)
			Expect(imp.Spec.Ports).To(HaveEach(HaveField("AppProtocol", BeNil())))
			Expect(imp.Spec.SessionAffinity).To(Equal(corev1.ServiceAffinityClientIP))
			Expect(imp.Spec.SessionAffinityConfig).To(Equal(svc.Spec.SessionAffinityConfig))
			Expect(imp.Spec.InternalTrafficPolicy).To(Equal(svc.Spec.InternalTrafficPolicy))
			Expect(imp.Spec.TrafficDistribution).To(Equal(svc.Spec.TrafficDistribution))
			Expect(imp.Labels).To(HaveKeyWithValue("dummy-label", "true"))
			Expect(imp.Annotations).To(HaveKeyWithValue("dummy-annotation", "true"))
			for _, k := range []string{"dummy-svc", "dummy-svcexport"} {
				Expect(imp.Labels).NotTo(HaveKey(k))
				Expect(imp.Annotations).NotTo(HaveKey(k))
			}
			Eventually(func(g Gomega) {
				imp, err := getImport(ctx, c)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(imp.Spec.IPs).NotTo(BeEmpty())
				g.Expect(imp.Spec.IPs).To(HaveLen(len(imp.Spec.IPFamilies)))
				for i, ip := range imp.Spec.IPs {
					parsed := net.ParseIP(ip)
					g.Expect(parsed).NotTo(BeNil(), ip)
					family := corev1.IPv6Protocol
					if parsed.To4() != nil {
						family = corev1.IPv4Protocol
					}
					g.Expect(imp.Spec.IPFamilies[i]).To(Equal(family), "the families in the order of the addresses")
				}
			}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		}
		var seen []string
		Eventually(func(g Gomega) {
			seen = nil
			for _, c := range bed.Clusters() {
				imp, err := getImport(ctx, c)
				g.Expect(err).NotTo(HaveOccurred())
				for _, family := range imp.Spec.IPFamilies {
					found := false
					for _, s := range mcsSlices(ctx, c) {
						if string(s.AddressType) == string(family) && len(s.Endpoints) > 0 {
							g.Expect(s.Labels).To(HaveKeyWithValue(mcsv1beta1.LabelServiceName, "hello"))
							g.Expect(s.Labels[discoveryv1.LabelManagedBy]).NotTo(BeElementOf("", "endpointslice-controller.k8s.io"))
							found = true
							seen = append(seen, c.Name+"/"+s.Name)
						}
					}
					g.Expect(found).To(BeTrue(), "no MCS EndpointSlice of family %s in %s", family, c.Name)
				}
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

		unexport(ctx, c0)
		for _, c := range bed.Clusters() {
			awaitNoImport(ctx, c)
		}
		Eventually(func() []discoveryv1.EndpointSlice {
			var left []discoveryv1.EndpointSlice
			for _, c := range bed.Clusters() {
				left = append(left, mcsSlices(ctx, c)...)
			}
			return left
		}).WithContext(ctx).WithTimeout(20*time.Second).Should(BeEmpty(), "the EndpointSlices %v", seen)
	})

	It("merges two exports as the KEP says: the union of the ports with a Conflict on both; the oldest's port, headlessness and exported labels win; the import lives while one export does", func(ctx SpecContext) {
		deploy(ctx, c0, hello(nil))
		export(ctx, c0, func(e *mcsv1beta1.ServiceExport) { e.Spec.ExportedLabels = map[string]string{"dummy-label": "true"} })
		awaitImport(ctx, c0)
		time.Sleep(1100 * time.Millisecond) // c0's export strictly older, at one-second granularity
		deploy(ctx, c1, hello(func(s *corev1.ServiceSpec) {
			s.ClusterIP = corev1.ClusterIPNone
			s.Ports = []corev1.ServicePort{
				{Name: "tcp", Port: 43, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(42)},
				{Name: "stcp", Port: 142, Protocol: corev1.ProtocolSCTP, TargetPort: intstr.FromInt32(142)}}
		}))
		export(ctx, c1, func(e *mcsv1beta1.ServiceExport) { e.Spec.ExportedLabels = map[string]string{"dummy-label2": "true"} })
		for _, c := range []*testbed.Cluster{c0, c1} {
			Eventually(condition(ctx, c, mcsv1beta1.ServiceExportConditionConflict)).WithContext(ctx).WithTimeout(20*time.Second).
				Should(Equal(metav1.ConditionTrue), "Conflict on the export in %s", c.Name)
		}
		Eventually(func(g Gomega) {
			for _, c := range bed.Clusters() {
				imp, err := getImport(ctx, c)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(imp.Spec.Type).To(Equal(mcsv1beta1.ClusterSetIP), "the oldest export's headlessness, in %s", c.Name)
				g.Expect(ports(imp)).To(Equal([]string{"stcp 142/SCTP", "tcp 42/TCP", "udp 42/UDP"}), "the union, the oldest's tcp, in %s", c.Name)
				g.Expect(imp.Labels).To(HaveKeyWithValue("dummy-label", "true"))
				g.Expect(imp.Labels).NotTo(HaveKey("dummy-label2"))
				g.Expect(imp.Status.Clusters).To(ConsistOf(mcsv1beta1.ClusterStatus{Cluster: c0.Name}, mcsv1beta1.ClusterStatus{Cluster: c1.Name}))
			}
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())

		// The suite's first case: the import stays while one export does, and goes with the last.
		unexport(ctx, c0)
		Consistently(func() error { _, err := getImport(ctx, c0); return err }).WithContext(ctx).WithTimeout(5 * time.Second).Should(Succeed())
		unexport(ctx, c1)
		awaitNoImport(ctx, c0)
	})

	It("exports a headless Service as a Headless import without addresses, and refuses an ExternalName one (Valid False, no import)", func(ctx SpecContext) {
		deploy(ctx, c0, hello(func(s *corev1.ServiceSpec) { s.ClusterIP = corev1.ClusterIPNone }))
		export(ctx, c0, nil)
		for _, c := range bed.Clusters() {
			Expect(awaitImport(ctx, c).Spec.Type).To(Equal(mcsv1beta1.Headless), c.Name)
			_, err := c.Clientset.CoreV1().Services(ns).Get(ctx, mcs.DerivedServiceName("hello"), metav1.GetOptions{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a headless import has no address Service, in %s", c.Name)
		}
		Consistently(func(g Gomega) {
			for _, c := range bed.Clusters() {
				imp, err := getImport(ctx, c)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(imp.Spec.IPs).To(BeEmpty())
			}
		}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(time.Second).Should(Succeed())
		unexport(ctx, c0)
		for _, c := range bed.Clusters() {
			awaitNoImport(ctx, c)
		}
		Expect(c0.Clientset.CoreV1().Services(ns).Delete(ctx, "hello", metav1.DeleteOptions{})).To(Succeed())

		_, err := c0.Clientset.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hello"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		export(ctx, c0, nil)
		Eventually(condition(ctx, c0, mcsv1beta1.ServiceExportConditionValid)).WithContext(ctx).WithTimeout(20 * time.Second).Should(Equal(metav1.ConditionFalse))
		Consistently(func() bool {
			for _, c := range bed.Clusters() {
				if _, err := getImport(ctx, c); !apierrors.IsNotFound(err) {
					return false
				}
			}
			return true
		}).WithContext(ctx).WithTimeout(5*time.Second).Should(BeTrue(), "an import of an ExternalName Service")
	})
})
