package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/mcs"
	"github.com/flotilla-dev/flotilla/test/testbed"
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
		// Placement reads the bindings from the manager's cache, a moment behind: wait until the
		// webhook holds team A to its set (a dry run naming secondary2 waits, naming the set), as a
		// user would see a new RBAC binding take effect, before the specs place anything.
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(teamA).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "binding-probe",
				Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s2.Name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Annotations[flotillav1.AnnotationNoClusterFits]).To(ContainSubstring("not in the ClusterSets bound to namespace " + teamA))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
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

	It("shows in each set's status the clusters it holds, and Resolved", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		for name, want := range map[string][]string{"tenancy-first": {s1.Name}, "tenancy-both": {s1.Name, s2.Name}} {
			Eventually(func(g Gomega) {
				var set flotillav1.ClusterSet
				g.Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Name: name}, &set)).To(Succeed())
				g.Expect(set.Status.Clusters).To(Equal(want))
				g.Expect(meta.IsStatusConditionTrue(set.Status.Conditions, flotillav1.ConditionResolved)).To(BeTrue(), "%+v", set.Status.Conditions)
			}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		}
	})

	It("spreads a team bound to a set of both clusters over both", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		deployment(ctx, teamB, "web", 4)
		Eventually(func(g Gomega) {
			g.Expect(runningProxies(ctx, g, teamB, "app=web", flotillav1.VirtualNodeName(s1.Name))).To(Equal(2))
			g.Expect(runningProxies(ctx, g, teamB, "app=web", flotillav1.VirtualNodeName(s2.Name))).To(Equal(2))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("refuses a Replicator into a team's namespace that names a cluster outside its sets, naming the set; one for every cluster replicates into the set's clusters only", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		c := clientOf(bed.Primary)
		// The team's namespace exists: it opts in to be replicated into.
		Expect(c.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: teamA, Labels: map[string]string{flotillav1.LabelReplicationAllowed: "true"}}},
			client.Merge)).To(Succeed())
		settings := func(name string, targets ...string) *flotillav1.Replicator {
			return &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: flotillav1.ReplicatorSpec{
				TargetCluster: targets, ReplicationNamespace: teamA, ConfigMapName: name, ConfigMapData: map[string]string{"team": "a"}}}
		}
		err := c.Create(ctx, settings("tenancy-a-elsewhere", s2.Name))
		Expect(err).To(HaveOccurred(), "a Replicator into %s that names %s was admitted", teamA, s2.Name)
		Expect(err.Error()).To(ContainSubstring(s2.Name + ": not in the ClusterSets bound to namespace " + teamA + " (tenancy-first)"))

		every := settings("tenancy-a-everywhere", "*")
		Expect(c.Create(ctx, every)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(c.Delete(ctx, every))).To(Succeed())
			Eventually(func() error { _, err := replicatorStatus(ctx, every.Name); return err }).WithContext(ctx).
				WithTimeout(60 * time.Second).Should(MatchError(ContainSubstring("not found")))
		})
		Eventually(func(g Gomega) {
			g.Expect(clientOf(s1).Get(ctx, client.ObjectKey{Namespace: teamA, Name: every.Name}, &corev1.ConfigMap{})).To(Succeed())
			st, err := replicatorStatus(ctx, every.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Status.Synced).To(Equal(flotillav1.SyncedTrue), "%+v", st.Status.Conditions)
			g.Expect(st.Status.Clusters).To(ConsistOf(HaveField("Name", "primary"), HaveField("Name", s1.Name)))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(clientOf(s2).Get(ctx, client.ObjectKey{Namespace: teamA, Name: every.Name}, &corev1.ConfigMap{})).To(
				MatchError(ContainSubstring("not found")), "replicated into %s, outside the team's sets", s2.Name)
		}).WithContext(ctx).WithTimeout(3 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("counts no export of a team's in a cluster outside its sets, saying why on the export, and imports the team's exports only into its sets' clusters", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		prepareNamespace(ctx, s2, teamA) // its admin opens the namespace there to this primary
		exportIn := func(c *testbed.Cluster, name string) {
			_, err := c.Clientset.CoreV1().Services(teamA).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			export := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: name}}
			Expect(clientOf(c).Create(ctx, export)).To(Succeed())
			// What the spec made in a secondary is the user's, which Flotilla leaves there.
			DeferCleanup(func(ctx SpecContext) {
				Expect(client.IgnoreNotFound(clientOf(c).Delete(ctx, export))).To(Succeed())
				Expect(client.IgnoreNotFound(clientOf(c).Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: name}}))).To(Succeed())
			})
		}
		exportIn(bed.Primary, "api")
		exportIn(s2, "local")
		imported := func(c *testbed.Cluster, name string) error {
			return clientOf(c).Get(ctx, client.ObjectKey{Namespace: teamA, Name: name}, &mcsv1beta1.ServiceImport{})
		}
		Eventually(func(g Gomega) {
			g.Expect(imported(s1, "api")).To(Succeed(), "the team's export is imported in %s, a cluster of its set", s1.Name)
			var e mcsv1beta1.ServiceExport
			g.Expect(clientOf(s2).Get(ctx, client.ObjectKey{Namespace: teamA, Name: "local"}, &e)).To(Succeed())
			valid := meta.FindStatusCondition(e.Status.Conditions, string(mcsv1beta1.ServiceExportConditionValid))
			g.Expect(valid).NotTo(BeNil(), "%+v", e.Status.Conditions)
			g.Expect(valid.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(valid.Reason).To(Equal(string(mcs.ReasonNamespaceDenied)))
			g.Expect(valid.Message).To(ContainSubstring("namespace " + teamA + " may not use cluster " + s2.Name + ": not in the ClusterSets bound to namespace " + teamA + " (tenancy-first)"))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(imported(s2, "api")).To(MatchError(ContainSubstring("not found")), "imported into %s, outside the team's sets", s2.Name)
			for _, c := range []*testbed.Cluster{bed.Primary, s1} {
				g.Expect(imported(c, "local")).To(MatchError(ContainSubstring("not found")), "the export in %s counted in %s", s2.Name, c.Name)
			}
		}).WithContext(ctx).WithTimeout(3 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	}, SpecTimeout(3*time.Minute))
})
