package e2e

import (
	"context"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// availabilityWatch samples the Ready proxies of a workload in the primary and records the most
// that were ever unavailable (not Ready, or terminating) out of want.
type availabilityWatch struct {
	mu             sync.Mutex
	maxUnavailable int
	at             string
	samples        int
}

func (w *availabilityWatch) run(ctx context.Context, namespace, selector string, want int, every time.Duration) {
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		pods, err := bed.Primary.Clientset.CoreV1().Pods(namespace).List(pctx, metav1.ListOptions{LabelSelector: selector})
		cancel()
		if err == nil {
			ready := 0
			for i := range pods.Items {
				if pods.Items[i].DeletionTimestamp == nil && podReady(&pods.Items[i]) {
					ready++
				}
			}
			w.mu.Lock()
			w.samples++
			if want-ready > w.maxUnavailable {
				w.maxUnavailable, w.at = want-ready, time.Now().Format(time.RFC3339Nano)
			}
			w.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
}

func (w *availabilityWatch) result() (maxUnavailable, samples int, at string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxUnavailable, w.samples, w.at
}

// movingNamespace prepares a group whose specs move elected pods between the secondaries: both
// joined, the namespace enabled in the primary and ready in each secondary, and every virtual node
// uncordoned when the group is done.
func movingNamespace(ctx SpecContext, ns string) {
	joinBothSecondaries(ctx)
	enabledNamespace(ctx, ns)
	for _, c := range bed.Secondaries {
		prepareNamespace(ctx, c, ns)
	}
	DeferCleanup(func(ctx SpecContext) {
		for _, c := range bed.Secondaries {
			setUnschedulable(ctx, c.Name, false)
		}
	})
}

// setUnschedulable cordons or uncordons a virtual node directly (as kubectl cordon would).
func setUnschedulable(ctx context.Context, cluster string, on bool) {
	_, err := bed.Primary.Clientset.CoreV1().Nodes().Patch(ctx, flotillav1.VirtualNodeName(cluster), types.MergePatchType,
		fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, on), metav1.PatchOptions{})
	Expect(err).NotTo(HaveOccurred())
}

// expectNotPlaceableIn asserts that the webhook would not place an elected pod chosen for cluster
// there now (a dry run; see expectPlaceableIn).
func expectNotPlaceableIn(g Gomega, ctx SpecContext, cluster string) {
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe-not-" + cluster, Annotations: map[string]string{
		flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: cluster}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "registry.k8s.io/pause:3.10"}}}}
	ensureProbeNamespace(g, ctx)
	placed, err := bed.Primary.Clientset.CoreV1().Pods(probeNamespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(placed.Spec.NodeName).To(BeEmpty(), "the webhook would still place a pod in %s", cluster)
}

// readyProxiesOn counts the Ready, not terminating proxies matching selector on cluster's virtual node.
func readyProxiesOn(ctx context.Context, g Gomega, ns, selector, cluster string) int {
	pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	g.Expect(err).NotTo(HaveOccurred())
	n := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && podReady(p) && p.Spec.NodeName == flotillav1.VirtualNodeName(cluster) {
			n++
		}
	}
	return n
}

// `flotillactl cluster drain` moves a secondary's elected pods to the others through the
// primary's Eviction API. The pods are placed in secondary1 by cordoning secondary2's virtual
// node while they are created (a cluster choice, flotilla.dev/clusters, would also keep their
// replacements there). Fake (kwok) nodes run the delegates: the specs count pods, they carry no
// traffic.
var _ = Describe("cluster drain", Ordered, Serial, Label("disruptive"), func() {
	const ns = "drain"

	BeforeAll(func(ctx SpecContext) { movingNamespace(ctx, ns) }, NodeTimeout(2*time.Minute))

	It("moves an elected Deployment of 6 to secondary2 never leaving more than 1 unavailable (its PodDisruptionBudget), and a StatefulSet of 3 one pod at a time, never running an ordinal twice", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		setUnschedulable(ctx, s2.Name, true)
		Eventually(func(g Gomega) { expectNotPlaceableIn(g, ctx, s2.Name) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		six, three := int32(6), int32(3)
		web, db := map[string]string{"app": "web"}, map[string]string{"app": "db"}
		elect := map[string]string{flotillav1.AnnotationElect: ""}
		_, err := bed.Primary.Clientset.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: web}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{Replicas: &six, Selector: &metav1.LabelSelector{MatchLabels: web}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: web, Annotations: elect},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = bed.Primary.Clientset.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Spec: appsv1.StatefulSetSpec{Replicas: &three, ServiceName: "db", Selector: &metav1.LabelSelector{MatchLabels: db}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: db, Annotations: elect},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			g.Expect(readyProxiesOn(ctx, g, ns, "app=web", s1.Name)).To(Equal(6))
			g.Expect(readyProxiesOn(ctx, g, ns, "app=db", s1.Name)).To(Equal(3))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
		// The budget allows one disruption once its controller has counted the 6.
		Eventually(func(g Gomega) int32 {
			pdb, err := bed.Primary.Clientset.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			return pdb.Status.DisruptionsAllowed
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Equal(int32(1)))

		out, err := flotillactl(ctx, "cluster", "uncordon", s2.Name)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring(flotillav1.VirtualNodeName(s2.Name) + " uncordoned"))
		Eventually(func(g Gomega) { expectPlaceableIn(g, ctx, s2.Name) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		// Sampled every 200 ms from before the drain until every pod runs in secondary2.
		var avail availabilityWatch
		identities := identityWatch{every: 200 * time.Millisecond}
		wctx, stop := context.WithCancel(ctx)
		var watchers sync.WaitGroup
		watchers.Go(func() { defer GinkgoRecover(); avail.run(wctx, ns, "app=web", 6, 200*time.Millisecond) })
		watchers.Go(func() { defer GinkgoRecover(); identities.run(wctx, ns, "app=db", bed.Secondaries) })
		DeferCleanup(func() { stop(); watchers.Wait() })

		start := time.Now()
		out, err = flotillactl(ctx, "cluster", "drain", s1.Name, "--timeout", "150s")
		took := time.Since(start)
		GinkgoWriter.Printf("cluster drain %s:\n%s\n", s1.Name, out)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("Drained " + s1.Name))
		Expect(out).To(ContainSubstring("at-most-once waiting their turn"))
		Eventually(func(g Gomega) {
			g.Expect(readyProxiesOn(ctx, g, ns, "app=web", s2.Name)).To(Equal(6))
			g.Expect(readyProxiesOn(ctx, g, ns, "app=db", s2.Name)).To(Equal(3))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		Expect(delegatesIn(ctx, s1, ns)).To(BeEmpty(), "delegates left in %s", s1.Name)
		stop()
		watchers.Wait()

		maxUnavailable, samples, at := avail.result()
		Expect(samples).To(BeNumerically(">", 10), "the availability watch ran")
		Expect(maxUnavailable).To(BeNumerically("<=", 1), "%d of 6 unavailable at %s", maxUnavailable, at)
		violations, polls := identities.result()
		Expect(polls).To(BeNumerically(">", 10), "the identity watch ran")
		Expect(violations).To(BeEmpty(), "a StatefulSet ordinal ran twice")
		AddReportEntry("drain of 6 + 3 pods", took.Round(100*time.Millisecond).String())
		AddReportEntry("most unavailable of 6 (PodDisruptionBudget maxUnavailable 1)", fmt.Sprintf("%d in %d samples", maxUnavailable, samples))
		AddReportEntry("StatefulSet identity checks", fmt.Sprint(polls))

		// Drained again: nothing to do, nothing changes.
		out, err = flotillactl(ctx, "cluster", "drain", s1.Name)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("0 pod(s) moved"))
	}, SpecTimeout(6*time.Minute))

	It("refuses a pod no controller owns without --force, changing nothing; evicts it with --force; uncordon makes the cluster eligible again", func(ctx SpecContext) {
		s1 := bed.Secondaries[0]
		out, err := flotillactl(ctx, "cluster", "uncordon", s1.Name)
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func(g Gomega) { expectPlaceableIn(g, ctx, s1.Name) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		_, err = bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare",
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s1.Name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) int { return readyProxiesOn(ctx, g, ns, "!app", s1.Name) }).WithContext(ctx).WithTimeout(time.Minute).Should(Equal(1))

		cordoned := func() bool {
			n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, flotillav1.VirtualNodeName(s1.Name), metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return n.Spec.Unschedulable
		}
		out, err = flotillactl(ctx, "cluster", "drain", s1.Name, "--dry-run")
		Expect(err).To(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("refuse " + ns + "/bare: no controller owns it"))
		Expect(cordoned()).To(BeFalse(), "a dry run cordoned")

		out, err = flotillactl(ctx, "cluster", "drain", s1.Name)
		Expect(err).To(HaveOccurred(), out)
		Expect(out).To(And(ContainSubstring(ns+"/bare: refused: no controller owns it"), ContainSubstring("--force"), ContainSubstring("nothing changed")))
		Expect(cordoned()).To(BeFalse(), "a refusing drain cordoned")
		Expect(readyProxiesOn(ctx, Default, ns, "!app", s1.Name)).To(Equal(1), "the refused pod was touched")

		out, err = flotillactl(ctx, "cluster", "drain", s1.Name, "--force")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(cordoned()).To(BeTrue())
		Eventually(func(g Gomega) {
			pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "!app"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) { expectNotPlaceableIn(g, ctx, s1.Name) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		out, err = flotillactl(ctx, "cluster", "uncordon", s1.Name)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(cordoned()).To(BeFalse())
		Eventually(func(g Gomega) { expectPlaceableIn(g, ctx, s1.Name) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	}, SpecTimeout(4*time.Minute))
})
