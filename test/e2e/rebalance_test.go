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
	"k8s.io/apimachinery/pkg/util/intstr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// After a failover the pods stay where it put them; `flotillactl rebalance`, or the manager with
// --rebalance-on-return, brings them back, one pod of a controller at a time through the Eviction
// API, within the workload's PodDisruptionBudget.
var _ = Describe("rebalance", Ordered, Serial, Label("disruptive"), func() {
	const ns = "rebalance"

	BeforeAll(func(ctx SpecContext) {
		joinBothSecondaries(ctx)
		enabledNamespace(ctx, ns)
	})

	// failedOverAndBack runs an elected Deployment of 6 (PDB maxUnavailable 1) split 3/3, stops
	// secondary1 until all 6 run in secondary2, starts it again, and returns a function that says
	// how many pods of it run in a cluster, and a sampler of the fewest Ready from then on.
	failedOverAndBack := func(ctx SpecContext, name string) (func(Gomega, string) int, *readySampler) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		six := int32(6)
		sel := map[string]string{"app": name}
		_, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{Replicas: &six, Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationFailoverSeconds: "5"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = bed.Primary.Clientset.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{})
		})
		one := intstr.FromInt32(1)
		_, err = bed.Primary.Clientset.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: sel}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		in := func(g Gomega, c string) int {
			return runningProxies(ctx, g, ns, "app="+name, flotillav1.VirtualNodeName(c))
		}
		Eventually(func(g Gomega) {
			g.Expect(in(g, s1.Name)).To(Equal(3))
			g.Expect(in(g, s2.Name)).To(Equal(3))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())

		// secondary1 away past --failover-after and the pods' 5 s: all 6 run in secondary2.
		startAgain := stopForSpec(ctx, s1)
		Eventually(func(g Gomega) {
			g.Expect(in(g, s2.Name)).To(Equal(6))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		startAgain(ctx)
		Eventually(func(g Gomega) { expectRunningAndReady(g, ctx, s1.Name) }).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		return in, startReadySampler(ctx, "app="+name)
	}

	It("moves nothing by itself after a failover, and `flotillactl rebalance` brings the split back to 3 and 3 within the budget", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		in, sampler := failedOverAndBack(ctx, "by-hand")
		Consistently(func(g Gomega) {
			g.Expect(in(g, s2.Name)).To(Equal(6))
		}).WithContext(ctx).WithTimeout(15 * time.Second).WithPolling(time.Second).Should(Succeed())
		out, err := flotillactl(ctx, "rebalance", "-n", ns, "-l", "app=by-hand", "--dry-run")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("3 move(s) planned"))
		start := time.Now()
		out, err = flotillactl(ctx, "rebalance", "-n", ns, "-l", "app=by-hand", "--timeout", "3m")
		Expect(err).NotTo(HaveOccurred(), out)
		AddReportEntry("flotillactl rebalance of 3 moves", time.Since(start).Round(time.Second).String())
		GinkgoWriter.Println(out)
		Eventually(func(g Gomega) {
			g.Expect(in(g, s1.Name)).To(Equal(3))
			g.Expect(in(g, s2.Name)).To(Equal(3))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		fewest, samples := sampler.stop()
		AddReportEntry("fewest Ready while rebalancing (of 6)", fmt.Sprintf("%d in %d samples", fewest, samples))
		Expect(fewest).To(BeNumerically(">=", 5), "the budget allows 1 unavailable of 6")
	}, SpecTimeout(8*time.Minute))

	It("with --rebalance-on-return, brings the split back to 3 and 3 by itself once the secondary has been back a while, within the budget", func(ctx SpecContext) {
		// The chart grants the manager pods/eviction only with election.rebalanceOnReturn: the
		// suite's manager runs as the chart's ServiceAccount, so this proves the chart's rule too.
		chartRebalance := func(ctx SpecContext, on string) {
			out, err := helm(ctx, bed.Primary, "upgrade", "flotilla", "charts/flotilla", "-n", "flotilla-system", "--reuse-values",
				"--set", "election.rebalanceOnReturn="+on, "--wait")
			Expect(err).NotTo(HaveOccurred(), "helm upgrade: %s", out)
		}
		chartRebalance(ctx, "true")
		restartManager(ctx, "--rebalance-on-return", "--rebalance-after=5s", "--rebalance-interval=2s")
		DeferCleanup(func(ctx SpecContext) {
			restartManager(ctx)
			chartRebalance(ctx, "false")
		})
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		in, sampler := failedOverAndBack(ctx, "on-return")
		back := time.Now()
		Eventually(func(g Gomega) {
			g.Expect(in(g, s1.Name)).To(Equal(3))
			g.Expect(in(g, s2.Name)).To(Equal(3))
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("back to 3 and 3 after the secondary returned", time.Since(back).Round(time.Second).String())
		fewest, samples := sampler.stop()
		AddReportEntry("fewest Ready while rebalancing (of 6)", fmt.Sprintf("%d in %d samples", fewest, samples))
		Expect(fewest).To(BeNumerically(">=", 5), "the budget allows 1 unavailable of 6")
		evs, err := bed.Primary.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + flotillav1.ReasonRebalanced})
		Expect(err).NotTo(HaveOccurred())
		Expect(evs.Items).NotTo(BeEmpty(), "each evicted pod says why")
	}, SpecTimeout(8*time.Minute))
})

// readySampler counts, every 200 ms, the Ready pods of a selector in the rebalance namespace.
type readySampler struct {
	mu              sync.Mutex
	fewest, samples int
	cancel          context.CancelFunc
	done            chan struct{}
}

func startReadySampler(ctx context.Context, selector string) *readySampler {
	s := &readySampler{fewest: -1, done: make(chan struct{})}
	sampling, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	go func() {
		defer GinkgoRecover()
		defer close(s.done)
		for sampling.Err() == nil {
			pods, err := bed.Primary.Clientset.CoreV1().Pods("rebalance").List(sampling, metav1.ListOptions{LabelSelector: selector})
			if err == nil {
				ready := 0
				for i := range pods.Items {
					if pods.Items[i].DeletionTimestamp == nil && podReady(&pods.Items[i]) {
						ready++
					}
				}
				s.mu.Lock()
				if s.fewest < 0 || ready < s.fewest {
					s.fewest = ready
				}
				s.samples++
				s.mu.Unlock()
			}
			select {
			case <-sampling.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the fewest Ready seen and the number of samples.
func (s *readySampler) stop() (fewest, samples int) {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fewest, s.samples
}
