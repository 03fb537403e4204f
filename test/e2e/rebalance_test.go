package e2e

import (
	"context"
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

// A secondary back from a failover gets its share of elected pods again (--rebalance-on-return),
// one pod of a controller at a time through the Eviction API, within the workload's
// PodDisruptionBudget.
var _ = Describe("rebalance on return", Ordered, func() {
	const ns = "rebalance"

	BeforeAll(func(ctx SpecContext) {
		restartManager(ctx, "--rebalance-on-return", "--rebalance-after=5s")
		DeferCleanup(func(ctx SpecContext) { restartManager(ctx) })
		joinBothSecondaries(ctx)
		enabledNamespace(ctx, ns)
	})

	It("brings an elected Deployment of 6 that failed over to one secondary back to 3 and 3 once the other returns, never more than 1 unavailable", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		six := int32(6)
		sel := map[string]string{"app": "rebalanced"}
		_, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "rebalanced"},
			Spec: appsv1.DeploymentSpec{Replicas: &six, Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationFailoverSeconds: "5"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		one := intstr.FromInt32(1)
		_, err = bed.Primary.Clientset.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "rebalanced"},
			Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: sel}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		in := func(g Gomega, c string) int {
			return runningProxies(ctx, g, ns, "app=rebalanced", flotillav1.VirtualNodeName(c))
		}
		Eventually(func(g Gomega) {
			g.Expect(in(g, s1.Name)).To(Equal(3))
			g.Expect(in(g, s2.Name)).To(Equal(3))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())

		// secondary1 away past --failover-after and the pods' 5 s: all 6 run in secondary2.
		Expect(bed.StopCluster(ctx, s1)).To(Succeed())
		stopped := true
		DeferCleanup(func(ctx SpecContext) {
			if stopped {
				Expect(bed.StartCluster(ctx, s1)).To(Succeed())
			}
		})
		Eventually(func(g Gomega) {
			g.Expect(in(g, s2.Name)).To(Equal(6))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

		// Back: from now on the budget holds, sampled every 200 ms.
		Expect(bed.StartCluster(ctx, s1)).To(Succeed())
		stopped = false
		back := time.Now()
		var mu sync.Mutex
		fewest, samples := 6, 0
		sampling, cancel := context.WithCancel(ctx)
		go func() {
			defer GinkgoRecover()
			for sampling.Err() == nil {
				pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(sampling, metav1.ListOptions{LabelSelector: "app=rebalanced"})
				if err == nil {
					ready := 0
					for i := range pods.Items {
						if pods.Items[i].DeletionTimestamp == nil && podReady(&pods.Items[i]) {
							ready++
						}
					}
					mu.Lock()
					fewest, samples = min(fewest, ready), samples+1
					mu.Unlock()
				}
				time.Sleep(200 * time.Millisecond)
			}
		}()
		Eventually(func(g Gomega) {
			g.Expect(in(g, s1.Name)).To(Equal(3))
			g.Expect(in(g, s2.Name)).To(Equal(3))
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		cancel()
		mu.Lock()
		defer mu.Unlock()
		AddReportEntry("back to 3 and 3 after the secondary returned", time.Since(back).Round(time.Second).String())
		AddReportEntry("fewest Ready while rebalancing", fewest, samples)
		Expect(fewest).To(BeNumerically(">=", 5), "the budget allows 1 unavailable of 6")
		evs, err := bed.Primary.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + flotillav1.ReasonRebalanced})
		Expect(err).NotTo(HaveOccurred())
		Expect(evs.Items).NotTo(BeEmpty(), "each evicted pod says why")
	}, SpecTimeout(8*time.Minute))
})
