package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

var _ = Describe("many teams, one fleet", Ordered, func() {
	const teamA, teamB = "tenancy-a", "tenancy-b"

	BeforeAll(func(ctx SpecContext) {
		joinBothSecondaries(ctx)
		enabledNamespace(ctx, teamA)
		enabledNamespace(ctx, teamB)
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		c := clientOf(bed.Primary)
		sets := []*flotillav1.ClusterSet{
			{ObjectMeta: metav1.ObjectMeta{Name: "tenancy-first"}, Spec: flotillav1.ClusterSetSpec{Clusters: []string{s1.Name}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "tenancy-both"}, Spec: flotillav1.ClusterSetSpec{Selector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: flotillav1.LabelCluster, Operator: metav1.LabelSelectorOpIn, Values: []string{s1.Name, s2.Name}}}}}},
		}
		for _, s := range sets {
			Expect(c.Create(ctx, s)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { _ = c.Delete(ctx, s) })
		}
		for ns, set := range map[string]string{teamA: "tenancy-first", teamB: "tenancy-both"} {
			Expect(c.Create(ctx, &flotillav1.ClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: set},
				Spec: flotillav1.ClusterSetBindingSpec{ClusterSet: set}})).To(Succeed())
		}
	})

	deployment := func(ctx SpecContext, ns, name string, replicas int32) {
		sel := map[string]string{"app": name}
		_, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}

	It("keeps a team bound to one cluster set there: its Deployment all in it, and its pod that names another cluster waits, naming the set", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		deployment(ctx, teamA, "web", 4)
		Eventually(func(g Gomega) {
			g.Expect(runningProxies(ctx, g, teamA, "app=web", flotillav1.VirtualNodeName(s1.Name))).To(Equal(4))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(runningProxies(ctx, Default, teamA, "app=web", flotillav1.VirtualNodeName(s2.Name))).To(BeZero())

		_, err := bed.Primary.Clientset.CoreV1().Pods(teamA).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere",
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s2.Name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Consistently(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(teamA).Get(ctx, "elsewhere", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Spec.NodeName).To(BeEmpty())
			g.Expect(p.Spec.SchedulingGates).To(ContainElement(HaveField("Name", flotillav1.SchedulingGatePlacement)))
			g.Expect(p.Annotations[flotillav1.AnnotationNoClusterFits]).To(ContainSubstring(s2.Name + ": not in the ClusterSets bound to namespace " + teamA + " (tenancy-first)"))
		}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(time.Second).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("spreads a team bound to a set of both clusters over both", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		deployment(ctx, teamB, "web", 4)
		Eventually(func(g Gomega) {
			g.Expect(runningProxies(ctx, g, teamB, "app=web", flotillav1.VirtualNodeName(s1.Name))).To(Equal(2))
			g.Expect(runningProxies(ctx, g, teamB, "app=web", flotillav1.VirtualNodeName(s2.Name))).To(Equal(2))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
	}, SpecTimeout(3*time.Minute))
})
