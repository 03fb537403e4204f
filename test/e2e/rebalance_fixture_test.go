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

// electedWithBudget creates, in ns, an elected Deployment of 6 that fails over after 5 s and a
// PodDisruptionBudget of maxUnavailable 1 over it (both deleted with the spec or group), and
// returns a function that says how many of its pods run in a cluster: the workload every rebalance
// spec moves.
func electedWithBudget(ctx SpecContext, ns, name string) func(context.Context, Gomega, string) int {
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
	return func(ctx context.Context, g Gomega, cluster string) int {
		return runningProxies(ctx, g, ns, "app="+name, flotillav1.VirtualNodeName(cluster))
	}
}

// readySampler measures, every 200 ms, the pods of a selector in a namespace of the primary (by
// default how many are Ready), and keeps the fewest and the most it saw.
type readySampler struct {
	mu                    sync.Mutex
	fewest, most, samples int
	cancel                context.CancelFunc
	done                  chan struct{}
}

func startReadySampler(ctx context.Context, ns, selector string) *readySampler {
	return startPodSampler(ctx, ns, selector, func(pods []corev1.Pod) int {
		ready := 0
		for i := range pods {
			if pods[i].DeletionTimestamp == nil && podReady(&pods[i]) {
				ready++
			}
		}
		return ready
	})
}

// startPodSampler samples measure over the pods of a selector until stopped.
func startPodSampler(ctx context.Context, ns, selector string, measure func([]corev1.Pod) int) *readySampler {
	s := &readySampler{fewest: -1, most: -1, done: make(chan struct{})}
	sampling, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	go func() {
		defer GinkgoRecover()
		defer close(s.done)
		for sampling.Err() == nil {
			pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(sampling, metav1.ListOptions{LabelSelector: selector})
			if err == nil {
				m := measure(pods.Items)
				s.mu.Lock()
				if s.fewest < 0 || m < s.fewest {
					s.fewest = m
				}
				s.most = max(s.most, m)
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

// mostSeen is the largest measure the sampler saw (call after stop).
func (s *readySampler) mostSeen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.most
}

// stop ends the sampling and returns the fewest Ready seen and the number of samples.
func (s *readySampler) stop() (fewest, samples int) {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fewest, s.samples
}
