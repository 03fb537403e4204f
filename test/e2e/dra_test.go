package e2e

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// Device claims (Dynamic Resource Allocation) follow their pods. secondary1 has a DeviceClass and
// two fake nodes of two devices each, whose ResourceSlices the spec publishes as a driver would;
// secondary2 has neither. Each secondary's own scheduler allocates its delegates' claims; kwok runs
// the pods. No kubelet plugin prepares the devices: what a container sees of them is not proved
// here. It needs no real node, but runs on the bed with them, whose run is the shorter.
var _ = Describe("device claims (DRA) across the fleet", Ordered, Serial, Label("disruptive", "bed-with-real-nodes"), func() {
	const ns, class = "devices", "gpu.e2e.flotilla.dev"
	var s1, s2 *testbed.Cluster
	var nodes []string

	BeforeAll(func(ctx SpecContext) {
		s1, s2 = bed.Secondaries[0], bed.Secondaries[1]
		joinBothSecondaries(ctx)
		enabledNamespace(ctx, ns)
		var err error
		nodes, err = testbed.AddNodes(ctx, s1, testbed.ExtraNodes{Prefix: "dra", Count: 2})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { Expect(testbed.DeleteNodes(ctx, s1, nodes)).To(Succeed()) })
		publishDevices(ctx, s1, class, nodes)
		primary := clientOf(bed.Primary)
		for name, count := range map[string]int64{"one-gpu": 1, "three-gpus": 3} {
			Expect(primary.Create(ctx, &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: resourcev1.ResourceClaimTemplateSpec{Spec: gpuClaimSpec(class, count)}})).To(Succeed())
		}
		Expect(primary.Create(ctx, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns}, Spec: gpuClaimSpec(class, 1)})).To(Succeed())
	})

	// claimingPod elects a pod whose one container uses claim "gpu": from a template, or named.
	claimingPod := func(ctx SpecContext, name string, source corev1.PodResourceClaim, annotations map[string]string) {
		source.Name = "gpu"
		meta := metav1.ObjectMeta{Name: name, Annotations: map[string]string{flotillav1.AnnotationElect: ""}}
		for k, v := range annotations {
			meta.Annotations[k] = v
		}
		_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: meta,
			Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{source},
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
					Claims:   []corev1.ResourceClaim{{Name: "gpu"}}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
	// delegateOn waits until a pod's delegate is scheduled in c on one of the device nodes, and
	// returns it.
	delegateOn := func(ctx SpecContext, name string, c *testbed.Cluster) *corev1.Pod {
		var d *corev1.Pod
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Spec.NodeName).To(Equal(flotillav1.VirtualNodeName(c.Name)), "why: %s", p.Annotations[flotillav1.AnnotationNoClusterFits])
			g.Expect(p.Spec.ResourceClaims).To(BeEmpty(), "the proxy keeps no claim")
			d, err = c.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Spec.ResourceClaims).To(HaveLen(1))
			g.Expect(d.Spec.Containers[0].Resources.Claims).To(HaveLen(1))
			g.Expect(d.Spec.NodeName).To(HavePrefix("dra"), "scheduled on a node with devices")
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		return d
	}

	It("counts secondary1's devices of the class on its ClusterDetector and virtual node; secondary2 has none", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			var cd flotillav1.ClusterDetector
			g.Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: s1.Name}, &cd)).To(Succeed())
			g.Expect(cd.Status.DevicesUnknown).To(BeEmpty())
			g.Expect(cd.Status.Devices).To(ContainElement(flotillav1.DeviceClassStatus{Class: class, Total: 4, Free: 4}))
			// Read from its discovery: a 1.35 cluster serves DRA, in-place resize and admission policies.
			for _, f := range []string{"DynamicResourceAllocation", "InPlacePodResize", "ValidatingAdmissionPolicy"} {
				g.Expect(cd.Status.MissingFeatures).NotTo(ContainElement(HavePrefix(f)))
			}
			vn, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, flotillav1.VirtualNodeName(s1.Name), metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			total := vn.Status.Capacity[corev1.ResourceName(flotillav1.DeviceResourcePrefix+class)]
			g.Expect(total.Value()).To(BeEquivalentTo(4))
			g.Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: s2.Name}, &cd)).To(Succeed())
			g.Expect(cd.Status.DevicesUnknown).To(BeEmpty())
			for _, d := range cd.Status.Devices {
				g.Expect(d.Class).NotTo(Equal(class))
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
	})

	It("sends a pod with a claim template to secondary1, where its delegate's own claim is allocated and the proxy says which device; holds a pod needing more devices than a node has, saying why per cluster; the pod deleted, its claim in secondary1 goes", func(ctx SpecContext) {
		claimingPod(ctx, "one", corev1.PodResourceClaim{ResourceClaimTemplateName: ptr.To("one-gpu")}, nil)
		d := delegateOn(ctx, "one", s1)
		var claimName string
		Eventually(func(g Gomega) {
			live, err := s1.Clientset.CoreV1().Pods(ns).Get(ctx, "one", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(live.Status.ResourceClaimStatuses).To(HaveLen(1))
			claimName = ptr.Deref(live.Status.ResourceClaimStatuses[0].ResourceClaimName, "")
			claim, err := s1.Clientset.ResourceV1().ResourceClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(claim.Status.Allocation).NotTo(BeNil())
			g.Expect(claim.Status.Allocation.Devices.Results).To(HaveLen(1))
			r := claim.Status.Allocation.Devices.Results[0]
			g.Expect(r.Pool).To(Equal(d.Spec.NodeName))
			events, err := bed.Primary.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=one,reason=" + flotillav1.ReasonDevicesAllocated})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(events.Items).NotTo(BeEmpty())
			g.Expect(events.Items[0].Message).To(And(ContainSubstring("node "+d.Spec.NodeName), ContainSubstring(fmt.Sprintf("gpu=%s/%s/%s", class, r.Pool, r.Device))))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		// The template's copy in secondary1 is this primary's.
		tmpl, err := s1.Clientset.ResourceV1().ResourceClaimTemplates(ns).Get(ctx, "one-gpu", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(tmpl.Labels).To(HaveKey(flotillav1.LabelPrimary))

		By("a pod needing 3 devices: no node has more than 2, and secondary2 has no such class")
		claimingPod(ctx, "three", corev1.PodResourceClaim{ResourceClaimTemplateName: ptr.To("three-gpus")}, nil)
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "three", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Spec.NodeName).To(BeEmpty())
			g.Expect(p.Annotations[flotillav1.AnnotationNoClusterFits]).To(And(
				ContainSubstring(s1.Name+": needs 3 devices of class "+class+" (request gpu of claim gpu), at most 2 free on one node, and no node has them at all"),
				ContainSubstring(s2.Name+": device class "+class+" absent (claim gpu)")))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("the first pod deleted, its claim in secondary1 goes with its delegate")
		Expect(bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, "one", metav1.DeleteOptions{})).To(Succeed())
		Eventually(func(g Gomega) {
			_, err := s1.Clientset.ResourceV1().ResourceClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "claim %s: %v", claimName, err)
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, "three", metav1.DeleteOptions{})).To(Succeed())
	})

	It("keeps two pods that name one claim in one cluster, though the second prefers the other, where devices are free too; the claim copied there once and reserved for both delegates", func(ctx SpecContext) {
		claimingPod(ctx, "first", corev1.PodResourceClaim{ResourceClaimName: ptr.To("shared")}, nil)
		first := delegateOn(ctx, "first", s1)

		By("secondary2 gets the class and a node of two devices")
		s2nodes, err := testbed.AddNodes(ctx, s2, testbed.ExtraNodes{Prefix: "dra", Count: 1})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { Expect(testbed.DeleteNodes(ctx, s2, s2nodes)).To(Succeed()) })
		publishDevices(ctx, s2, class, s2nodes)
		Eventually(func(g Gomega) {
			var cd flotillav1.ClusterDetector
			g.Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: s2.Name}, &cd)).To(Succeed())
			g.Expect(cd.Status.Devices).To(ContainElement(flotillav1.DeviceClassStatus{Class: class, Total: 2, Free: 2}))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("the second pod weighs secondary2 a hundred times secondary1, and still goes where the claim is")
		claimingPod(ctx, "second", corev1.PodResourceClaim{ResourceClaimName: ptr.To("shared")},
			map[string]string{flotillav1.AnnotationClusterWeights: s1.Name + "=1," + s2.Name + "=100"})
		second := delegateOn(ctx, "second", s1)
		Expect(second.Spec.NodeName).To(Equal(first.Spec.NodeName), "a claim's devices are on one node")
		Eventually(func(g Gomega) {
			claim, err := s1.Clientset.ResourceV1().ResourceClaims(ns).Get(ctx, "shared", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(claim.Labels).To(HaveKey(flotillav1.LabelPrimary))
			var by []string
			for _, r := range claim.Status.ReservedFor {
				by = append(by, r.Name)
			}
			g.Expect(by).To(ConsistOf("first", "second"))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		_, err = s2.Clientset.ResourceV1().ResourceClaims(ns).Get(ctx, "shared", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the claim copied to secondary2: %v", err)

		By("a third pod of that weight, with a claim of its own, goes to secondary2")
		claimingPod(ctx, "third", corev1.PodResourceClaim{ResourceClaimTemplateName: ptr.To("one-gpu")},
			map[string]string{flotillav1.AnnotationClusterWeights: s1.Name + "=1," + s2.Name + "=100"})
		delegateOn(ctx, "third", s2)
		Expect(bed.Primary.Clientset.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})).To(Succeed())
		podsGone(ctx, ns, "")
	})
})

// publishDevices makes, in c, a DeviceClass of the driver class and, as that driver would, a
// ResourceSlice of two devices for each node; all are removed after the spec.
func publishDevices(ctx SpecContext, c *testbed.Cluster, class string, nodes []string) {
	cl := clientOf(c)
	dc := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + class + `"`}}}}}
	Expect(cl.Create(ctx, dc)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, dc))).To(Succeed()) })
	for _, node := range nodes {
		s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-" + class}, Spec: resourcev1.ResourceSliceSpec{
			Driver: class, NodeName: ptr.To(node), Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1}}}
		for i := range 2 {
			s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i),
				Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("40Gi")}}})
		}
		Expect(cl.Create(ctx, s)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, s))).To(Succeed()) })
	}
}

// gpuClaimSpec requests count devices of class.
func gpuClaimSpec(class string, count int64) resourcev1.ResourceClaimSpec {
	return resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
		Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, Count: count, AllocationMode: resourcev1.DeviceAllocationModeExactCount}}}}}
}
