package e2e

import (
	"os"
	"slices"
	"sort"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// serverVersion is a cluster's API server version, as its discovery says.
func serverVersion(c *testbed.Cluster) string {
	v, err := c.Clientset.Discovery().ServerVersion()
	Expect(err).NotTo(HaveOccurred(), "the version of %s", c.Name)
	return v.GitVersion
}

var _ = Describe("a fleet of many versions", func() {
	It("runs each cluster on the version the bed gives it, the mix by default, and each ClusterDetector shows its secondary's", func(ctx SpecContext) {
		joinBothSecondaries(ctx)
		def, err := testbed.DefaultKubeVersion()
		Expect(err).NotTo(HaveOccurred())
		distinct := map[string]bool{}
		for _, c := range append([]*testbed.Cluster{bed.Primary}, bed.Secondaries...) {
			want := c.KubeVersion
			if want == "" {
				want = def
			}
			got := serverVersion(c)
			Expect(got).To(Equal(want), "cluster %s", c.Name)
			distinct[got] = true
			AddReportEntry(c.Name, got)
			if c.Role == testbed.RoleSecondary {
				Eventually(func(g Gomega) {
					cd, err := detector(ctx, c.Name)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(cd.Status.KubernetesVersion).To(Equal(want))
				}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
			}
		}
		// The default mix (the bed with real nodes, FLOTILLA_BED_VERSIONS unset): three minors.
		if os.Getenv(testbed.KubeVersionsEnv) == "" && os.Getenv("FLOTILLA_E2E_REAL_NODES") != "0" {
			Expect(distinct).To(HaveLen(3), "the default mix: the primary, secondary1 and secondary2 on three minors")
		}
	})
})

var _ = Describe("a secondary upgraded in place", Ordered, Serial, Label("disruptive"), func() {
	const ns = "upgraded"

	It("keeps every delegate (same UIDs, same start times) while its control plane moves to the next minor, and its ClusterDetector shows the new version", func(ctx SpecContext) {
		def, err := testbed.DefaultKubeVersion()
		Expect(err).NotTo(HaveOccurred())
		// The secondary on a minor older than KUBE_VERSION, which it is upgraded to.
		var s1 *testbed.Cluster
		for _, c := range bed.Secondaries {
			if c.KubeVersion != "" && testbed.MinorOf(c.KubeVersion) < testbed.MinorOf(def) {
				s1 = c
			}
		}
		if s1 == nil {
			Skip("no secondary of the bed runs a minor older than " + def + " to upgrade it to (" + testbed.KubeVersionsEnv + " names the versions)")
		}
		from := s1.KubeVersion
		joinBothSecondaries(ctx)
		enabledNamespace(ctx, ns)
		prepareNamespace(ctx, s1, ns)
		four := int32(4)
		sel := map[string]string{"app": "kept"}
		_, err = bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "kept"},
			Spec: appsv1.DeploymentSpec{Replicas: &four, Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s1.Name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = bed.Primary.Clientset.AppsV1().Deployments(ns).Delete(ctx, "kept", metav1.DeleteOptions{})
			podsGone(ctx, ns, "app=kept")
		})
		// delegates: each delegate's UID with its container's start time, Running, in that secondary.
		delegates := func(g Gomega) []string {
			list, err := s1.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=kept"})
			g.Expect(err).NotTo(HaveOccurred())
			var out []string
			for _, d := range list.Items {
				g.Expect(d.Status.Phase).To(Equal(corev1.PodRunning), "delegate %s", d.Name)
				g.Expect(d.Status.ContainerStatuses).To(HaveLen(1), "delegate %s", d.Name)
				running := d.Status.ContainerStatuses[0].State.Running
				g.Expect(running).NotTo(BeNil(), "delegate %s", d.Name)
				out = append(out, string(d.UID)+"@"+running.StartedAt.UTC().Format(time.RFC3339))
			}
			sort.Strings(out)
			return out
		}
		var before []string
		Eventually(func(g Gomega) {
			before = delegates(g)
			g.Expect(before).To(HaveLen(4))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())

		By(s1.Name + "'s control plane moves from " + from + " to " + def + ", its etcd kept")
		Expect(bed.UpgradeCluster(ctx, s1, def)).To(Succeed())
		Expect(serverVersion(s1)).To(Equal(def))
		upgraded := time.Now()
		Eventually(func(g Gomega) {
			cd, err := detector(ctx, s1.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cd.Status.KubernetesVersion).To(Equal(def))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		AddReportEntry("the ClusterDetector showed the new version after", time.Since(upgraded).Round(100*time.Millisecond).String())

		By("every delegate is the one it was, started when it was; every proxy Running")
		Eventually(func(g Gomega) {
			g.Expect(delegates(g)).To(Equal(before))
			proxies, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=kept"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(proxies.Items).To(HaveLen(4))
			for _, p := range proxies.Items {
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "proxy %s", p.Name)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(delegates(g)).To(Equal(before))
		}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(slices.Compact(before)).To(HaveLen(4))
	})
})
