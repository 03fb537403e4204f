package e2e

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flotilla-dev/flotilla/test/testbed"
)

func testNamespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func podsInPhase(pods []corev1.Pod, phase corev1.PodPhase) int {
	n := 0
	for _, p := range pods {
		if p.Status.Phase == phase {
			n++
		}
	}
	return n
}

var _ = Describe("the test bed", func() {
	It("runs a primary and two secondaries that answer /readyz, with Ready fake nodes", func(ctx SpecContext) {
		Expect(bed.Secondaries).To(HaveLen(2))
		Expect(testbed.Check(ctx, bed.KubeconfigPath)).To(Succeed())
		for _, c := range bed.Clusters() {
			for _, name := range c.Nodes {
				n, err := c.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				Expect(err).NotTo(HaveOccurred())
				Expect(n.Annotations).To(HaveKeyWithValue(testbed.FakeNodeAnnotation, "fake"))
				Expect(testbed.NodeReady(n)).To(BeTrue(), "node %s of %s", name, c.Name)
			}
			version, err := c.Clientset.Discovery().ServerVersion()
			Expect(err).NotTo(HaveOccurred())
			want := c.KubeVersion
			if want == "" {
				want, err = testbed.DefaultKubeVersion()
				Expect(err).NotTo(HaveOccurred())
			}
			Expect(version.GitVersion).To(Equal(want), "the API server's version must be stamped")
		}
	}, SpecTimeout(30*time.Second))

	It("runs a Deployment applied in each secondary on that secondary's fake nodes", func(ctx SpecContext) {
		for _, c := range bed.Secondaries {
			ns := "bed-deploy"
			_, err := c.Clientset.CoreV1().Namespaces().Create(ctx, testNamespace(ns), metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			labels := map[string]string{"app": "web"}
			_, err = c.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "web"},
				Spec: appsv1.DeploymentSpec{
					Replicas: ptr.To[int32](4),
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
					},
				},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		for _, c := range bed.Secondaries {
			Eventually(func(g Gomega) {
				pods, err := c.Clientset.CoreV1().Pods("bed-deploy").List(ctx, metav1.ListOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(podsInPhase(pods.Items, corev1.PodRunning)).To(Equal(4))
				for _, p := range pods.Items {
					g.Expect(c.Nodes).To(ContainElement(p.Spec.NodeName), "pod %s", p.Name)
				}
			}).WithContext(ctx).Should(Succeed(), "cluster %s", c.Name)
		}
	}, SpecTimeout(2*time.Minute))

	It("completes a restartPolicy Never pod that no Job owns, and serves its logs", func(ctx SpecContext) {
		c := bed.Secondaries[0]
		ns := "bed-complete"
		_, err := c.Clientset.CoreV1().Namespaces().Create(ctx, testNamespace(ns), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = c.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "once"},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "once", Image: "busybox"}},
			},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() (string, error) {
			raw, err := c.Clientset.CoreV1().Pods(ns).GetLogs("once", &corev1.PodLogOptions{}).DoRaw(ctx)
			return string(raw), err
		}).WithContext(ctx).Should(ContainSubstring(testbed.PodLogLine(c.Name)))
		Eventually(func() (corev1.PodPhase, error) {
			p, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, "once", metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return p.Status.Phase, nil
		}).WithContext(ctx).Should(Equal(corev1.PodSucceeded))
	}, SpecTimeout(2*time.Minute))

	It("leaves the primary's nodes without kwok's annotation alone", func(ctx SpecContext) {
		// Flotilla's virtual nodes are such nodes: kwok must never make them Ready nor fake their pods.
		name := fmt.Sprintf("not-kwok-%d", time.Now().UnixNano())
		_, err := bed.Primary.Clientset.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(bed.Primary.Clientset.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
		})
		Consistently(func() ([]corev1.NodeCondition, error) {
			n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return n.Status.Conditions, nil
		}).WithContext(ctx).Should(BeEmpty())
	}, SpecTimeout(30*time.Second))
})
