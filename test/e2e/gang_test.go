package e2e

import (
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha1 "k8s.io/api/scheduling/v1alpha1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// Gangs: a group of elected pods that must run together goes whole to one cluster that fits every
// member, or waits whole. Each secondary offers the gangs one fake node (label gangLabel), whose
// room a filler pod of the secondary's own sets.
var _ = Describe("gangs", Ordered, Serial, Label("disruptive"), func() {
	const ns, gangLabel = "gangs", "e2e.flotilla.dev/gang-node"
	var s1, s2 *testbed.Cluster
	node := map[string]string{} // cluster -> its gang node

	// roomFor leaves room for n one-CPU members on a cluster's gang node: a filler pod of the
	// secondary's own takes the rest of its free CPU.
	roomFor := func(ctx SpecContext, c *testbed.Cluster, n int64) {
		pods := c.Clientset.CoreV1().Pods("default")
		_ = pods.Delete(ctx, "gang-filler", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		Eventually(func() error {
			_, err := pods.Get(ctx, "gang-filler", metav1.GetOptions{})
			return err
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(MatchError(ContainSubstring("not found")))
		n0, err := c.Clientset.CoreV1().Nodes().Get(ctx, node[c.Name], metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		onIt, err := c.Clientset.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node[c.Name]})
		Expect(err).NotTo(HaveOccurred())
		free := n0.Status.Allocatable.Cpu().MilliValue()
		for _, p := range onIt.Items {
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			for _, ctr := range p.Spec.Containers {
				free -= ctr.Resources.Requests.Cpu().MilliValue()
			}
		}
		fill := free - n*1000
		Expect(fill).To(BeNumerically(">", 0), "node %s has %dm free", node[c.Name], free)
		_, err = pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gang-filler"}, Spec: corev1.PodSpec{NodeName: node[c.Name],
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(fill, resource.DecimalSI)}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// Placement judges the clusters as the manager last saw them: wait until it sees this
		// room, asking the webhook (a dry run) whether a pod of n CPUs fits there and one of n+1 not.
		Eventually(func(g Gomega) {
			g.Expect(fitsOn(g, ctx, c.Name, n)).To(BeTrue(), "%d CPUs on %s", n, node[c.Name])
			g.Expect(fitsOn(g, ctx, c.Name, n+1)).To(BeFalse(), "%d CPUs on %s", n+1, node[c.Name])
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	}
	member := func(ctx SpecContext, name string, labels, annotations map[string]string) {
		ann := map[string]string{flotillav1.AnnotationElect: ""}
		for k, v := range annotations {
			ann[k] = v
		}
		_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: ann},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{gangLabel: "true"}, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
	gangOf := func(name string, size int) map[string]string {
		return map[string]string{flotillav1.AnnotationGang: name, flotillav1.AnnotationGangSize: fmt.Sprint(size)}
	}
	// clustersOf maps each named proxy to the cluster it is bound to ("" while it is not).
	clustersOf := func(g Gomega, ctx SpecContext, names ...string) map[string]string {
		out := map[string]string{}
		for _, n := range names {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			out[n], _ = flotillav1.ClusterOfNode(p.Spec.NodeName)
		}
		return out
	}
	// allIn waits until every named member is bound to the cluster's virtual node.
	allIn := func(ctx SpecContext, cluster string, names ...string) {
		Eventually(func(g Gomega) {
			for n, c := range clustersOf(g, ctx, names...) {
				g.Expect(c).To(Equal(cluster), "member %s", n)
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
	}
	deleteMembers := func(ctx SpecContext, names ...string) {
		for _, n := range names {
			Expect(bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, n, metav1.DeleteOptions{})).To(Succeed())
		}
		Eventually(func(g Gomega) {
			for _, n := range names {
				_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
				g.Expect(err).To(MatchError(ContainSubstring("not found")))
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	}

	BeforeAll(func(ctx SpecContext) {
		s1, s2 = bed.Secondaries[0], bed.Secondaries[1]
		joinBothSecondaries(ctx)
		enabledNamespace(ctx, ns)
		for _, c := range []*testbed.Cluster{s1, s2} {
			nodes, err := c.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
			Expect(err).NotTo(HaveOccurred())
			Expect(nodes.Items).NotTo(BeEmpty())
			node[c.Name] = nodes.Items[0].Name
			patch := []byte(`{"metadata":{"labels":{"` + gangLabel + `":"true"}}}`)
			_, err = c.Clientset.CoreV1().Nodes().Patch(ctx, node[c.Name], types.MergePatchType, patch, metav1.PatchOptions{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) {
				_ = c.Clientset.CoreV1().Pods("default").Delete(ctx, "gang-filler", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
				_, _ = c.Clientset.CoreV1().Nodes().Patch(ctx, node[c.Name], types.MergePatchType,
					[]byte(`{"metadata":{"labels":{"`+gangLabel+`":null}}}`), metav1.PatchOptions{})
			})
		}
	})

	It("sends a gang of 4 whole to the cluster with room for all 4, not the one with room for 3", func(ctx SpecContext) {
		roomFor(ctx, s1, 3)
		roomFor(ctx, s2, 4)
		names := []string{"train-0", "train-1", "train-2", "train-3"}
		for _, n := range names {
			member(ctx, n, nil, gangOf("train", 4))
		}
		allIn(ctx, s2.Name, names...)
		deleteMembers(ctx, names...)
	})

	It("holds a gang that fits no cluster whole, each member saying why per cluster, and starts it whole once room frees", func(ctx SpecContext) {
		roomFor(ctx, s1, 3)
		roomFor(ctx, s2, 3)
		names := []string{"wide-0", "wide-1", "wide-2", "wide-3"}
		for _, n := range names {
			member(ctx, n, nil, gangOf("wide", 4))
		}
		Eventually(func(g Gomega) {
			for _, n := range names {
				p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(p.Spec.NodeName).To(BeEmpty())
				var msg string
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
						msg = c.Message
					}
				}
				g.Expect(msg).To(And(ContainSubstring("no cluster fits all 4 members of gang wide"),
					ContainSubstring(s1.Name+": its nodes have room for 3 of the gang's 4 members"),
					ContainSubstring(s2.Name+": its nodes have room for 3 of the gang's 4 members")), "member %s", n)
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			for n, c := range clustersOf(g, ctx, names...) {
				g.Expect(c).To(BeEmpty(), "member %s started alone", n)
			}
		}).WithContext(ctx).WithTimeout(3 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("room for 4 in secondary1: all 4 go there together")
		roomFor(ctx, s1, 4)
		allIn(ctx, s1.Name, names...)
		deleteMembers(ctx, names...)
	})

	It("places a Kueue pod group as a gang too, waiting for its last member", func(ctx SpecContext) {
		roomFor(ctx, s1, 2)
		roomFor(ctx, s2, 2)
		group := func(i int) (string, map[string]string, map[string]string) {
			return fmt.Sprintf("kueue-%d", i), map[string]string{flotillav1.LabelKueuePodGroup: "kq"},
				map[string]string{flotillav1.AnnotationKueuePodGroupTotal: "2"}
		}
		name, labels, ann := group(0)
		member(ctx, name, labels, ann)
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Spec.NodeName).To(BeEmpty())
			g.Expect(p.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("gang kq waits for its members: 1 of 2 are here"))))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		second, labels, ann := group(1)
		member(ctx, second, labels, ann)
		Eventually(func(g Gomega) {
			placed := clustersOf(g, ctx, name, second)
			g.Expect(placed[name]).NotTo(BeEmpty())
			g.Expect(placed[second]).To(Equal(placed[name]), "one cluster for the whole group")
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		deleteMembers(ctx, name, second)
	})

	It("places the Workload API's pod group as a gang: its members wait for their Workload, then go whole to the one cluster with room for its minCount", func(ctx SpecContext) {
		if served, _ := bed.Primary.Clientset.Discovery().ServerResourcesForGroupVersion("scheduling.k8s.io/v1alpha1"); served == nil ||
			!slices.ContainsFunc(served.APIResources, func(r metav1.APIResource) bool { return r.Name == "workloads" }) {
			Skip("the primary (Kubernetes " + serverVersion(bed.Primary) + ") does not serve 1.35's Workload API (scheduling.k8s.io/v1alpha1): the bed serves it in a primary on 1.35 (the bed without real nodes)")
		}
		roomFor(ctx, s1, 2)
		roomFor(ctx, s2, 3)
		names := []string{"wl-0", "wl-1", "wl-2"}
		for _, n := range names {
			_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: n, Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
				Spec: corev1.PodSpec{NodeSelector: map[string]string{gangLabel: "true"},
					WorkloadRef: &corev1.WorkloadReference{Name: "wl", PodGroup: "workers"},
					Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(func(g Gomega) {
			for _, n := range names {
				p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(p.Spec.WorkloadRef).NotTo(BeNil(), "the bed's primary serves the Workload API (GenericWorkload)")
				g.Expect(p.Spec.NodeName).To(BeEmpty())
				g.Expect(p.Status.Conditions).To(ContainElement(HaveField("Message",
					ContainSubstring("gang wl/workers waits for its Workload wl (scheduling.k8s.io)"))), "member %s", n)
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("the Workload comes: a gang of 3, which only secondary2 has room for")
		workloads := bed.Primary.Clientset.SchedulingV1alpha1().Workloads(ns)
		_, err := workloads.Create(ctx, &schedulingv1alpha1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "wl"},
			Spec: schedulingv1alpha1.WorkloadSpec{PodGroups: []schedulingv1alpha1.PodGroup{{Name: "workers",
				Policy: schedulingv1alpha1.PodGroupPolicy{Gang: &schedulingv1alpha1.GangSchedulingPolicy{MinCount: 3}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { _ = workloads.Delete(ctx, "wl", metav1.DeleteOptions{}) })
		allIn(ctx, s2.Name, names...)
		deleteMembers(ctx, names...)
	})

	It("places a PodGroup (Kubernetes 1.36+) as a gang: its members keep spec.schedulingGroup, wait for their PodGroup, then go whole to the one cluster with room for its minCount", func(ctx SpecContext) {
		version := ""
		for _, v := range []string{"v1beta1", "v1alpha2"} {
			if served, _ := bed.Primary.Clientset.Discovery().ServerResourcesForGroupVersion("scheduling.k8s.io/" + v); served != nil &&
				slices.ContainsFunc(served.APIResources, func(r metav1.APIResource) bool { return r.Name == "podgroups" }) {
				version = v
				break
			}
		}
		if version == "" {
			Skip("the primary (Kubernetes " + serverVersion(bed.Primary) + ") serves no PodGroups (scheduling.k8s.io, 1.36+): the bed serves them in a primary on 1.37 (the bed with real nodes)")
		}
		roomFor(ctx, s1, 2)
		roomFor(ctx, s2, 3)
		names := []string{"pg-0", "pg-1", "pg-2"}
		cl := clientOf(bed.Primary)
		for _, n := range names {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns, Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
				Spec: corev1.PodSpec{NodeSelector: map[string]string{gangLabel: "true"},
					Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
			// spec.schedulingGroup is newer than the API types the suite is built with.
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
			Expect(err).NotTo(HaveOccurred())
			u := &unstructured.Unstructured{Object: obj}
			u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
			Expect(unstructured.SetNestedField(u.Object, "trainers", "spec", "schedulingGroup", "podGroupName")).To(Succeed())
			Expect(cl.Create(ctx, u)).To(Succeed())
		}
		Eventually(func(g Gomega) {
			for _, n := range names {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
				g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, u)).To(Succeed())
				group, _, _ := unstructured.NestedString(u.Object, "spec", "schedulingGroup", "podGroupName")
				g.Expect(group).To(Equal("trainers"), "the proxy %s keeps spec.schedulingGroup", n)
				p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(p.Spec.NodeName).To(BeEmpty())
				g.Expect(p.Status.Conditions).To(ContainElement(HaveField("Message",
					ContainSubstring("gang trainers waits for its PodGroup trainers (scheduling.k8s.io)"))), "member %s", n)
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("the PodGroup comes: a gang of 3, which only secondary2 has room for")
		group := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "scheduling.k8s.io/" + version, "kind": "PodGroup",
			"metadata": map[string]any{"name": "trainers", "namespace": ns},
			"spec":     map[string]any{"schedulingPolicy": map[string]any{"gang": map[string]any{"minCount": int64(3)}}},
		}}
		Expect(cl.Create(ctx, group)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = cl.Delete(ctx, group) })
		allIn(ctx, s2.Name, names...)
		for _, n := range names {
			d, err := s2.Clientset.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(d.Annotations).NotTo(HaveKey(flotillav1.AnnotationPodGroup), "the delegate of %s", n)
		}
		deleteMembers(ctx, names...)
	})
})

// fitsOn asks the webhook, by a dry run, whether a pod of that many CPUs on a gang node fits the
// cluster now, as the manager sees it.
func fitsOn(g Gomega, ctx SpecContext, cluster string, cores int64) bool {
	ensureProbeNamespace(g, ctx)
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "room-" + cluster, Annotations: map[string]string{
		flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: cluster}},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"e2e.flotilla.dev/gang-node": "true"}, Containers: []corev1.Container{{Name: "c",
			Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: *resource.NewQuantity(cores, resource.DecimalSI)}}}}}}
	placed, err := bed.Primary.Clientset.CoreV1().Pods(probeNamespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	g.Expect(err).NotTo(HaveOccurred())
	_, full := placed.Annotations[flotillav1.AnnotationNoClusterFits]
	return !full
}

// Kueue writes a ResourceFlavor's node labels into a pod's node selector: on the virtual nodes'
// labels, that selector chooses the cluster, and the delegate does not carry it.
var _ = Describe("a node selector on the virtual nodes' labels", func() {
	It("elects the pod to the cluster it names, and leaves it out of the delegate's selector", func(ctx SpecContext) {
		const ns = "flavored"
		joinBothSecondaries(ctx)
		enabledNamespace(ctx, ns)
		s2 := bed.Secondaries[1]
		_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "flavored",
			Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{flotillav1.LabelCluster: s2.Name},
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "flavored", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Spec.NodeName).To(Equal(flotillav1.VirtualNodeName(s2.Name)))
			d, err := s2.Clientset.CoreV1().Pods(ns).Get(ctx, "flavored", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Spec.NodeSelector).NotTo(HaveKey(flotillav1.LabelCluster))
			g.Expect(d.Spec.NodeName).NotTo(BeEmpty(), "scheduled in %s", s2.Name)
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
	})
})
