package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// Accelerators as extended resources: secondary1 has 8 GPUs as 8 nodes of one (A100), secondary2
// one node of 4 (H100), every GPU node tainted as GPU nodes are. Placement judges a GPU pod per
// node, never by a cluster's sum. It needs no real node, but runs on the bed with them, whose
// run is the shorter (bed-with-real-nodes).
var _ = Describe("accelerators as extended resources", Ordered, Serial, Label("disruptive", "bed-with-real-nodes"), func() {
	const ns, gpu, product = "gpus", corev1.ResourceName("nvidia.com/gpu"), "nvidia.com/gpu.product"
	var s1, s2 *testbed.Cluster
	taint := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}

	BeforeAll(func(ctx SpecContext) {
		s1, s2 = bed.Secondaries[0], bed.Secondaries[1]
		joinBothSecondaries(ctx)
		enabledNamespace(ctx, ns)
		for _, x := range []struct {
			c     *testbed.Cluster
			nodes testbed.ExtraNodes
		}{
			{s1, testbed.ExtraNodes{Prefix: "gpu-a100", Count: 8, Resources: corev1.ResourceList{gpu: resource.MustParse("1")},
				Labels: map[string]string{product: "A100"}, Taints: []corev1.Taint{taint}}},
			{s2, testbed.ExtraNodes{Prefix: "gpu-h100", Count: 1, Resources: corev1.ResourceList{gpu: resource.MustParse("4")},
				Labels: map[string]string{product: "H100"}, Taints: []corev1.Taint{taint}}},
		} {
			names, err := testbed.AddNodes(ctx, x.c, x.nodes)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) { Expect(testbed.DeleteNodes(ctx, x.c, names)).To(Succeed()) })
		}
	})

	// gpuPod elects a pod asking for n GPUs (tolerating the GPU nodes' taint), with a node selector.
	gpuPod := func(ctx SpecContext, name, n string, selector map[string]string) {
		_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
			Spec: corev1.PodSpec{NodeSelector: selector, Tolerations: []corev1.Toleration{{Key: taint.Key, Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), gpu: resource.MustParse(n)},
					Limits:   corev1.ResourceList{gpu: resource.MustParse(n)}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
	// runsOn waits until a pod's proxy is bound to a cluster and its delegate scheduled there on a
	// node whose name starts with prefix.
	runsOn := func(ctx SpecContext, name string, c *testbed.Cluster, prefix string) {
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Spec.NodeName).To(Equal(flotillav1.VirtualNodeName(c.Name)))
			d, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Spec.NodeName).To(HavePrefix(prefix))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
	}

	It("shows each cluster's GPUs on its virtual node, tainted nodes included, and the most free on one node on its ClusterDetector", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			for c, want := range map[*testbed.Cluster][2]string{s1: {"8", "1"}, s2: {"4", "4"}} {
				vn, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, flotillav1.VirtualNodeName(c.Name), metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				total := vn.Status.Capacity[gpu]
				g.Expect(total.String()).To(Equal(want[0]), "GPUs of %s's virtual node", c.Name)
				g.Expect(largestFree(g, ctx, c.Name, gpu)).To(Equal(want[1]), "most GPUs free on one node of %s", c.Name)
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
	})

	It("sends a pod needing 4 GPUs to the cluster with a node of 4, never to the one with 8 nodes of 1; holds a second, saying why per cluster, until room frees; sends a pod selecting a GPU product to the cluster that has it", func(ctx SpecContext) {
		gpuPod(ctx, "four-a", "4", nil)
		runsOn(ctx, "four-a", s2, "gpu-h100")
		// Placement judges the clusters as the manager last saw them: the next pod comes once it
		// sees secondary2's node of 4 taken.
		Eventually(func(g Gomega) {
			g.Expect(largestFree(g, ctx, s2.Name, gpu)).To(Equal("0"))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

		By("a second pod needing 4: no node anywhere has 4 free, and only secondary2 ever will")
		gpuPod(ctx, "four-b", "4", nil)
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "four-b", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			// Per cluster, the nodes only full first: secondary2's node of 4 is where it would run.
			g.Expect(p.Annotations[flotillav1.AnnotationNoClusterFits]).To(And(
				ContainSubstring(s1.Name+": node "), ContainSubstring("has in all only nvidia.com/gpu 1 of 4 requested"),
				ContainSubstring(s2.Name+": node gpu-h100-0 has only nvidia.com/gpu 0 free of 4 requested")))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "four-b", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Spec.NodeName).To(BeEmpty(), "bound while no node has 4 GPUs free")
		}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("a pod selecting A100s goes to secondary1, the cluster that has them")
		gpuPod(ctx, "a100", "1", map[string]string{product: "A100"})
		runsOn(ctx, "a100", s1, "gpu-a100")

		By("the first pod gone, the second runs on secondary2's node of 4")
		Expect(bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, "four-a", metav1.DeleteOptions{})).To(Succeed())
		runsOn(ctx, "four-b", s2, "gpu-h100")
		Expect(bed.Primary.Clientset.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})).To(Succeed())
		podsGone(ctx, ns, "")
	})
})

// largestFree is the most of a resource free on one node of a cluster, as its ClusterDetector says.
func largestFree(g Gomega, ctx SpecContext, cluster string, name corev1.ResourceName) string {
	var cd flotillav1.ClusterDetector
	g.Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: cluster}, &cd)).To(Succeed())
	q := cd.Status.LargestFree[name]
	return q.String()
}
