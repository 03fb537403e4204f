package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// pastTheGate counts the namespace's proxies the quota let through (or that never waited), as
// the quota counts them: not ended, whatever their phase.
func pastTheGate(ctx context.Context, ns string) (past int, waiting []corev1.Pod, err error) {
	pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: flotillav1.LabelProxy + "=true"})
	if err != nil {
		return 0, nil, err
	}
	for _, p := range pods.Items {
		switch {
		case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		case p.Annotations[flotillav1.AnnotationQuota] == flotillav1.QuotaWaiting:
			waiting = append(waiting, p)
		default:
			past++
		}
	}
	return past, waiting, nil
}

// One group, one manager flag for both: the fleet denies by default (--tenancy-default-deny),
// the quota's namespace is bound to both secondaries, another namespace to none.
var _ = Describe("fleet quotas, in a fleet that denies by default", Ordered, Serial, Label("disruptive"), func() {
	const ns, unbound = "quota-team", "quota-unbound"
	denyByDefault := "--tenancy-default-deny"

	BeforeAll(func(ctx SpecContext) {
		joinBothSecondaries(ctx)
		enabledNamespace(ctx, ns)
		enabledNamespace(ctx, unbound)
		c := clientOf(bed.Primary)
		set := &flotillav1.ClusterSet{ObjectMeta: metav1.ObjectMeta{Name: "quota-both"}, Spec: flotillav1.ClusterSetSpec{
			Clusters: []string{bed.Secondaries[0].Name, bed.Secondaries[1].Name}}}
		Expect(c.Create(ctx, set)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(c.Delete(ctx, set))).To(Succeed()) })
		Expect(c.Create(ctx, &flotillav1.ClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quota-both"},
			Spec: flotillav1.ClusterSetBindingSpec{ClusterSet: "quota-both"}})).To(Succeed())
		restartManager(ctx, denyByDefault)
		DeferCleanup(func(ctx SpecContext) { restartManager(ctx) })
	}, NodeTimeout(3*time.Minute))

	It("keeps an unbound namespace's elected pod waiting, saying the fleet denies by default", func(ctx SpecContext) {
		_, err := bed.Primary.Clientset.CoreV1().Pods(unbound).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web",
			Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Consistently(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(unbound).Get(ctx, "web", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Spec.NodeName).To(BeEmpty())
			g.Expect(p.Spec.SchedulingGates).To(ContainElement(HaveField("Name", flotillav1.SchedulingGatePlacement)))
			g.Expect(p.Annotations[flotillav1.AnnotationNoClusterFits]).To(ContainSubstring("namespace " + unbound + " is bound to no ClusterSet, and the fleet denies by default"))
		}).WithContext(ctx).WithTimeout(3 * time.Second).WithPolling(time.Second).Should(Succeed())
	}, SpecTimeout(time.Minute))

	It("holds 60 elected pods created at once to a quota of 20 through a manager SIGKILL: never more than 20 past the gate, 20 Running and 40 waiting with QuotaExceeded naming the quota; the per-cluster limit sends the overflow to the other cluster; 5 deleted, the 5 oldest waiting start", func(ctx SpecContext) {
		const limit, created = 20, 60
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		c := clientOf(bed.Primary)
		quota := &flotillav1.FleetQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"}, Spec: flotillav1.FleetQuotaSpec{
			Hard:     corev1.ResourceList{corev1.ResourcePods: resource.MustParse("20"), "requests.cpu": resource.MustParse("100")},
			Clusters: []flotillav1.ClusterQuota{{Name: s1.Name, Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("8")}}},
		}}
		Expect(c.Create(ctx, quota)).To(Succeed())

		// Sampled every 200 ms from before the first pod to the end.
		var mu sync.Mutex
		most, samples := 0, 0
		sctx, stopSampling := context.WithCancel(ctx)
		sampled := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(sampled)
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-sctx.Done():
					return
				case <-tick.C:
				}
				if past, _, err := pastTheGate(sctx, ns); err == nil {
					mu.Lock()
					most, samples = max(most, past), samples+1
					mu.Unlock()
				}
			}
		}()
		DeferCleanup(func() { stopSampling(); <-sampled })

		sel := map[string]string{"app": "batch"}
		_, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "batch"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(created)), Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		// The leader goes in the middle of the burst: the next one counts again from the pods.
		Eventually(func(g Gomega) {
			past, _, err := pastTheGate(ctx, ns)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(past).To(BeNumerically(">=", 5))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("SIGKILL of the manager with some pods past the quota gate\n")
		Expect(manager.Kill()).To(Succeed())
		manager, err = startManager(managerBin, managerKubeconfig, filepath.Join(workDir, "manager.log"), denyByDefault)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() (int, error) { return httpStatus(http.DefaultClient, manager.probeURL+"/healthz") }).
			WithContext(ctx).WithTimeout(30 * time.Second).Should(Equal(http.StatusOK))

		var waiting []corev1.Pod
		Eventually(func(g Gomega) {
			g.Expect(runningProxies(ctx, g, ns, "app=batch", "")).To(Equal(limit))
			past, w, err := pastTheGate(ctx, ns)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(past).To(Equal(limit))
			g.Expect(w).To(HaveLen(created - limit))
			for _, p := range w {
				g.Expect(p.Annotations[flotillav1.AnnotationQuotaExceeded]).To(HavePrefix("FleetQuota team"), "why %s waits", p.Name)
				g.Expect(p.Spec.NodeName).To(BeEmpty())
			}
			waiting = w
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		Expect(waiting[0].Annotations[flotillav1.AnnotationQuotaExceeded]).To(ContainSubstring("FleetQuota team: pods 20/20 used, the pod asks for 1"))
		Expect(runningProxies(ctx, Default, ns, "app=batch", flotillav1.VirtualNodeName(s1.Name))).To(Equal(8), "the per-cluster limit of %s", s1.Name)
		Expect(runningProxies(ctx, Default, ns, "app=batch", flotillav1.VirtualNodeName(s2.Name))).To(Equal(12), "the overflow in %s", s2.Name)
		Eventually(func(g Gomega) {
			var q flotillav1.FleetQuota
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(quota), &q)).To(Succeed())
			g.Expect(q.Status.Summary).To(Equal("pods 20/20, requests.cpu 2/100"))
			g.Expect(q.Status.Waiting).To(BeEquivalentTo(created - limit))
			g.Expect(meta.IsStatusConditionTrue(q.Status.Conditions, flotillav1.ConditionExhausted)).To(BeTrue())
			g.Expect(q.Status.Clusters).To(ContainElement(And(HaveField("Name", s1.Name), HaveField("Used", HaveKeyWithValue(corev1.ResourcePods, resource.MustParse("8"))))))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())

		// Room frees: the oldest waiting go, not the pods made to replace the deleted ones (oldest
		// by creation, to the second, then by name, as the quota controller orders them).
		slices.SortFunc(waiting, func(a, b corev1.Pod) int {
			if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
		oldest := []string{}
		for _, p := range waiting[:5] {
			oldest = append(oldest, p.Name)
		}
		running, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=batch", FieldSelector: "status.phase=Running"})
		Expect(err).NotTo(HaveOccurred())
		for _, p := range running.Items[:5] {
			Expect(bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{})).To(Succeed())
		}
		Eventually(func(g Gomega) {
			g.Expect(runningProxies(ctx, g, ns, "app=batch", "")).To(Equal(limit))
			for _, name := range oldest {
				p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(p.Annotations[flotillav1.AnnotationQuota]).To(Equal(flotillav1.QuotaAdmitted), "%s, among the oldest waiting", name)
			}
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

		stopSampling()
		<-sampled
		mu.Lock()
		defer mu.Unlock()
		AddReportEntry("the most proxies past a quota of 20 pods, 60 created, a manager SIGKILL", most)
		Expect(samples).To(BeNumerically(">", 50), "too few samples")
		Expect(most).To(BeNumerically("<=", limit), "more than the quota past the gate at one moment, of %d samples", samples)
	}, SpecTimeout(8*time.Minute))
})
