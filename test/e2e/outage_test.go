package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// One outage of a secondary, asserted by every feature that reacts to it. Stopping a cluster and
// starting it again costs the bed its restart (kwokctl, the API server, DNS, metrics-server, the
// volume provisioner) and each feature its detection time; the features that see the same
// outage the same way share one: every feature's state is set up first, the secondary stops
// once, each feature asserts what it does while it is away in its own spec, the secondary
// starts once, and each feature asserts its recovery in its own spec. Each bound is measured from
// the stop or the return, as it was when each feature had an outage of its own, never from the
// start of its spec. Outages with another shape keep their own: a frozen (hung) API server, the
// data cluster of a stateful pod, a return the rebalancer waits for, a manager killed during the
// failover, the flat pod network's Multi-Cluster Services.
var _ = Describe("a secondary that stops answering, once for every feature", Ordered, Serial, Label("disruptive"), func() {
	const (
		ns            = "outage"
		replicatorNS  = "outage-replicated"
		replicatorKey = "outage-replicator"
		rebalanceNS   = "outage-rebalance"
	)
	var (
		s1, s2     *testbed.Cluster
		stoppedAt  time.Time
		returnedAt time.Time
		startAgain func(SpecContext)
		alertRules string
		byHand     func(context.Context, Gomega, string) int
		gangSpread *readySampler
	)
	// within is what is left of a bound that runs from t: a spec that comes later in the group
	// has no more time than the first.
	within := func(t time.Time, bound time.Duration) time.Duration {
		return max(bound-time.Since(t), time.Second)
	}
	runningOn := func(ctx SpecContext, g Gomega, node string) int {
		return runningProxies(ctx, g, ns, "app=failover", node)
	}

	BeforeAll(func(ctx SpecContext) {
		joinBothSecondaries(ctx)
		s1, s2 = bed.Secondaries[0], bed.Secondaries[1]

		// The inventory: ClusterProfiles are published once their CRD is served.
		installInventoryCRDs(ctx)

		// Election: 4 replicas that fail over after 10 s, spread 2 and 2.
		enabledNamespace(ctx, ns)
		four := int32(4)
		sel := map[string]string{"app": "failover"}
		_, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "failover"},
			Spec: appsv1.DeploymentSpec{Replicas: &four, Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationFailoverSeconds: "10"}},
				// A grace period of its own: the evicted proxies are released once it is over.
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](5), Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		// A gang of 4 that would rather run in secondary2 (its weights), failing over after 10 s.
		gangSel := map[string]string{"app": "gang"}
		_, err = bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "gang"},
			Spec: appsv1.DeploymentSpec{Replicas: &four, Selector: &metav1.LabelSelector{MatchLabels: gangSel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: gangSel, Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationFailoverSeconds: "10",
					flotillav1.AnnotationGang: "whole", flotillav1.AnnotationGangSize: "4",
					flotillav1.AnnotationClusterWeights: fmt.Sprintf("%s=1,%s=100", s1.Name, s2.Name)}},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](5), Containers: []corev1.Container{{Name: "c", Image: "nginx",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		// A Replicator of plumber's sample in every cluster, in a namespace of its own.
		rep := plumberSample(s1.Name, s2.Name)
		rep.Name = replicatorKey
		rep.Spec.ReplicationNamespace = replicatorNS
		Expect(clientOf(bed.Primary).Create(ctx, rep)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(clientOf(bed.Primary).Delete(ctx, rep))).To(Succeed())
			deleteNamespaceEverywhere(ctx, replicatorNS)
		}, NodeTimeout(3*time.Minute))

		// Rebalancing by hand: 6 replicas under a PodDisruptionBudget, split 3 and 3.
		enabledNamespace(ctx, rebalanceNS)
		byHand = electedWithBudget(ctx, rebalanceNS, "by-hand")

		// The alert: not while the secondary answers.
		alertRules = renderAlertRules(ctx, GinkgoT().TempDir())
		healthy := metricsScraper(ctx, GinkgoT().TempDir())("healthy.txt", fmt.Sprintf(`flotilla_cluster_ready{member_cluster=%q,role="secondary"} 1`, s2.Name))
		Expect(unreachableAlerts(ctx, alertRules, healthy, s2.Name, 6*time.Minute)).To(BeEmpty(), "%s answers", s2.Name)

		// Every feature settled before the outage.
		Eventually(func(g Gomega) {
			// Spread as the scheduler spreads over nodes: 2 and 2, whatever the coin says (placement by
			// free capacity alone put all 4 in one cluster one run in eight).
			g.Expect(runningOn(ctx, g, "")).To(Equal(4))
			g.Expect(runningOn(ctx, g, flotillav1.VirtualNodeName(s1.Name))).To(Equal(2))
			g.Expect(runningProxies(ctx, g, ns, "app=gang", flotillav1.VirtualNodeName(s2.Name))).To(Equal(4), "the gang, whole, where its weights prefer")
			g.Expect(delegatesIn(ctx, s2, ns)).To(HaveLen(6), "replicas and the gang in %s", s2.Name)
			st, err := replicatorStatus(ctx, replicatorKey)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Status.Synced).To(Equal("synced"), "%+v", st.Status.Clusters)
			g.Expect(st.Status.ClusterCount).To(Equal("3/3"))
			// The CRDs came after the manager started: it finds them at its next pass (at most a minute).
			g.Expect(conditionStatus(clusterProfile(g, ctx, s2.Name), "ControlPlaneHealthy")).To(Equal("True"))
			g.Expect(byHand(ctx, g, s1.Name)).To(Equal(3))
			g.Expect(byHand(ctx, g, s2.Name)).To(Equal(3))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())

		// How many clusters the gang's live, bound members are in, from before the stop on.
		// The group's specs outlive this node's context: the sampler has its own, stopped by the
		// gang's spec or the group's cleanup.
		gangSpread = startPodSampler(context.WithoutCancel(ctx), ns, "app=gang", func(pods []corev1.Pod) int {
			where := map[string]bool{}
			for _, p := range pods {
				if c, ok := flotillav1.ClusterOfNode(p.Spec.NodeName); ok && p.DeletionTimestamp == nil {
					where[c] = true
				}
			}
			return len(where)
		})
		DeferCleanup(func() { gangSpread.stop() })
		startAgain = stopForSpec(ctx, s2)
		stoppedAt = time.Now()
	}, NodeTimeout(6*time.Minute))

	Context("while it is stopped", func() {
		It("marks a stopped secondary (connection refused) Unknown and not Ready, and Ready again when it is back", func(ctx SpecContext) {
			Eventually(func(g Gomega) { expectUnknownAndNotReady(g, ctx, s2.Name) }).WithContext(ctx).WithTimeout(within(stoppedAt, 30*time.Second)).Should(Succeed())
			AddReportEntry("stopped secondary to Ready=False", time.Since(stoppedAt).Round(100*time.Millisecond).String())
			cd, err := detector(ctx, s2.Name)
			Expect(err).NotTo(HaveOccurred())
			Expect(cd.Status.Message).NotTo(ContainSubstring("eyJ"), "no credential in messages")
			unknownAt := time.Now()
			Eventually(func(g Gomega) {
				evs, err := bed.Primary.Clientset.EventsV1().Events(flotillav1.SystemNamespace).List(ctx, metav1.ListOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(evs.Items).To(ContainElement(And(
					HaveField("Regarding.Name", s2.Name), HaveField("Type", corev1.EventTypeWarning),
					HaveField("Reason", flotillav1.ReasonProbeFailed))))
			}).WithContext(ctx).WithTimeout(within(unknownAt, 15*time.Second)).Should(Succeed())
			expectRunningAndReady(Default, ctx, s1.Name)
		}, SpecTimeout(2*time.Minute))

		It("fails over: a stopped secondary's replicas run in the other within 120 s, and its stale delegates go when it is back", func(ctx SpecContext) {
			Eventually(func(g Gomega) {
				g.Expect(runningOn(ctx, g, flotillav1.VirtualNodeName(s1.Name))).To(Equal(4))
			}).WithContext(ctx).WithTimeout(within(stoppedAt, 120*time.Second)).WithPolling(time.Second).Should(Succeed())
			failedOver := time.Now()
			AddReportEntry("failover to the other secondary", time.Since(stoppedAt).Round(time.Second).String())
			n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, flotillav1.VirtualNodeName(s2.Name), metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(n.Spec.Taints).To(ContainElement(HaveField("Key", flotillav1.TaintUnreachable)))
			// At-least-once: once their grace period is over, the evicted proxies are released (not
			// left Terminating for as long as the secondary is away).
			Eventually(func(g Gomega) {
				pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=failover",
					FieldSelector: "spec.nodeName=" + flotillav1.VirtualNodeName(s2.Name)})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(pods.Items).To(BeEmpty())
			}).WithContext(ctx).WithTimeout(within(failedOver, 90*time.Second)).WithPolling(time.Second).Should(Succeed())
			AddReportEntry("evicted proxies released", time.Since(stoppedAt).Round(time.Second).String())
		}, SpecTimeout(4*time.Minute))

		It("restarts a gang whole in the other cluster, never part of it here and part there", func(ctx SpecContext) {
			Eventually(func(g Gomega) {
				g.Expect(runningProxies(ctx, g, ns, "app=gang", flotillav1.VirtualNodeName(s1.Name))).To(Equal(4))
			}).WithContext(ctx).WithTimeout(within(stoppedAt, 150*time.Second)).WithPolling(500 * time.Millisecond).Should(Succeed())
			_, samples := gangSpread.stop()
			AddReportEntry("gang restarted whole elsewhere", fmt.Sprintf("%s, %d samples from before the stop", time.Since(stoppedAt).Round(time.Second), samples))
			Expect(gangSpread.mostSeen()).To(Equal(1), "the gang's live members were in two clusters at once in some of %d samples", samples)
		}, SpecTimeout(3*time.Minute))

		It("moves every replica of a Deployment under a PodDisruptionBudget into the other cluster, where they stay for a rebalance by hand", func(ctx SpecContext) {
			Eventually(func(g Gomega) {
				g.Expect(byHand(ctx, g, s1.Name)).To(Equal(6))
			}).WithContext(ctx).WithTimeout(within(stoppedAt, 120*time.Second)).WithPolling(time.Second).Should(Succeed())
		}, SpecTimeout(3*time.Minute))

		It("reports a stopped secondary while the others keep syncing, and syncs it within 60 s of its return", func(ctx SpecContext) {
			patch := []byte(`{"spec":{"configMapData":{"extra.conf":"version 3"}}}`)
			Expect(clientOf(bed.Primary).Patch(ctx, &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: replicatorKey}},
				client.RawPatch(types.MergePatchType, patch))).To(Succeed())
			Eventually(func(g Gomega) {
				for _, c := range []*testbed.Cluster{bed.Primary, s1} {
					cm, err := c.Clientset.CoreV1().ConfigMaps(replicatorNS).Get(ctx, "nginx", metav1.GetOptions{})
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(cm.Data).To(HaveKeyWithValue("extra.conf", "version 3"), "in %s", c.Name)
				}
				st, err := replicatorStatus(ctx, replicatorKey)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(st.Status.Synced).To(Equal("not synced"))
				g.Expect(st.Status.ClusterCount).To(Equal("2/3"))
				g.Expect(st.Status.Clusters).To(ContainElement(And(HaveField("Name", s2.Name), HaveField("Synced", false), HaveField("Message", Not(BeEmpty())))))
				cond := meta.FindStatusCondition(st.Status.Conditions, "Synced")
				g.Expect(cond).NotTo(BeNil())
				g.Expect(cond.Message).To(ContainSubstring(s2.Name))
			}).WithContext(ctx).WithTimeout(45 * time.Second).Should(Succeed())
		}, SpecTimeout(2*time.Minute))

		It("says in a secondary's ClusterProfile when it stops answering, and when it answers again", func(ctx SpecContext) {
			Eventually(func(g Gomega) {
				g.Expect(conditionStatus(clusterProfile(g, ctx, s2.Name), "ControlPlaneHealthy")).To(Equal("False"))
			}).WithContext(ctx).WithTimeout(within(stoppedAt, 60*time.Second)).WithPolling(500 * time.Millisecond).Should(Succeed())
		}, SpecTimeout(2*time.Minute))

		It("fires FlotillaClusterUnreachable for a stopped secondary, and did not while it answered", func(ctx SpecContext) {
			stopped := metricsScraper(ctx, GinkgoT().TempDir())("stopped.txt", fmt.Sprintf(`flotilla_cluster_ready{member_cluster=%q,role="secondary"} 0`, s2.Name))
			Expect(unreachableAlerts(ctx, alertRules, stopped, s2.Name, 4*time.Minute)).To(ConsistOf(HaveField("State", "pending")), "not for 5 minutes yet")
			Expect(unreachableAlerts(ctx, alertRules, stopped, s2.Name, 6*time.Minute)).To(ConsistOf(And(HaveField("State", "firing"),
				HaveField("Labels", HaveKeyWithValue("severity", "critical")))))
		}, SpecTimeout(90*time.Second))
	})

	Context("once it answers again", func() {
		It("starts the stopped secondary again, once for every feature", func(ctx SpecContext) {
			startAgain(ctx)
			returnedAt = time.Now()
			AddReportEntry("outage", returnedAt.Sub(stoppedAt).Round(time.Second).String())
		}, SpecTimeout(5*time.Minute))

		It("marks a stopped secondary (connection refused) Unknown and not Ready, and Ready again when it is back", func(ctx SpecContext) {
			Eventually(func(g Gomega) { expectRunningAndReady(g, ctx, s2.Name) }).WithContext(ctx).WithTimeout(within(returnedAt, 30*time.Second)).Should(Succeed())
			AddReportEntry("restarted secondary to Ready", time.Since(returnedAt).Round(100*time.Millisecond).String())
			Expect(manager.Exited()).To(BeFalse())
		}, SpecTimeout(time.Minute))

		It("fails over: a stopped secondary's replicas run in the other within 120 s, and its stale delegates go when it is back", func(ctx SpecContext) {
			Eventually(func() []corev1.Pod { return delegatesIn(ctx, s2, ns) }).WithContext(ctx).WithTimeout(within(returnedAt, 60*time.Second)).Should(BeEmpty())
			AddReportEntry("stale delegates gone after return", time.Since(returnedAt).Round(time.Second).String())
			goneAt := time.Now()
			Eventually(func(g Gomega) {
				n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, flotillav1.VirtualNodeName(s2.Name), metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(n.Spec.Taints).NotTo(ContainElement(HaveField("Key", flotillav1.TaintUnreachable)))
			}).WithContext(ctx).WithTimeout(within(goneAt, 30*time.Second)).Should(Succeed())

			// The gang stayed whole where it restarted, though its weights prefer the cluster back.
			Expect(runningProxies(ctx, Default, ns, "app=gang", flotillav1.VirtualNodeName(s1.Name))).To(Equal(4))
			for _, d := range []string{"failover", "gang"} {
				Expect(bed.Primary.Clientset.AppsV1().Deployments(ns).Delete(ctx, d, metav1.DeleteOptions{})).To(Succeed())
			}
			Eventually(func() []corev1.Pod { return delegatesIn(ctx, s1, ns) }).WithContext(ctx).WithTimeout(60 * time.Second).Should(BeEmpty())
		}, SpecTimeout(3*time.Minute))

		It("reports a stopped secondary while the others keep syncing, and syncs it within 60 s of its return", func(ctx SpecContext) {
			Eventually(func(g Gomega) {
				st, err := replicatorStatus(ctx, replicatorKey)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(st.Status.Synced).To(Equal("synced"))
				cm, err := s2.Clientset.CoreV1().ConfigMaps(replicatorNS).Get(ctx, "nginx", metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(cm.Data).To(HaveKeyWithValue("extra.conf", "version 3"))
			}).WithContext(ctx).WithTimeout(within(returnedAt, 60*time.Second)).Should(Succeed())
			AddReportEntry("returned secondary synced", time.Since(returnedAt).Round(time.Second).String())
		}, SpecTimeout(2*time.Minute))

		It("says in a secondary's ClusterProfile when it stops answering, and when it answers again", func(ctx SpecContext) {
			Eventually(func(g Gomega) {
				g.Expect(conditionStatus(clusterProfile(g, ctx, s2.Name), "ControlPlaneHealthy")).To(Equal("True"))
			}).WithContext(ctx).WithTimeout(within(returnedAt, 90*time.Second)).WithPolling(500 * time.Millisecond).Should(Succeed())
		}, SpecTimeout(2*time.Minute))

		It("fires FlotillaClusterUnreachable for a stopped secondary, and did not while it answered", func(ctx SpecContext) {
			Eventually(func(g Gomega) { expectRunningAndReady(g, ctx, s2.Name) }).WithContext(ctx).WithTimeout(within(returnedAt, 30*time.Second)).Should(Succeed())
			back := metricsScraper(ctx, GinkgoT().TempDir())("back.txt", fmt.Sprintf(`flotilla_cluster_ready{member_cluster=%q,role="secondary"} 1`, s2.Name))
			Expect(unreachableAlerts(ctx, alertRules, back, s2.Name, 6*time.Minute)).To(BeEmpty(), "%s answers again", s2.Name)
		}, SpecTimeout(90*time.Second))

		// Last in the group: it moves pods, and every bound above runs from the return.
		It("moves nothing by itself after a failover, and `flotillactl rebalance` brings the split back to 3 and 3 within the budget", func(ctx SpecContext) {
			Eventually(func(g Gomega) { expectRunningAndReady(g, ctx, s2.Name) }).WithContext(ctx).WithTimeout(within(returnedAt, 30*time.Second)).Should(Succeed())
			sampler := startReadySampler(ctx, rebalanceNS, "app=by-hand")
			// Nothing moves by itself for 15 s from the return (the specs above took part of it): a
			// move is an eviction, which leaves its Event and its pod in the other cluster.
			Consistently(func(g Gomega) {
				g.Expect(byHand(ctx, g, s1.Name)).To(Equal(6))
			}).WithContext(ctx).WithTimeout(within(returnedAt, 15*time.Second)).WithPolling(time.Second).Should(Succeed())
			evs, err := bed.Primary.Clientset.CoreV1().Events(rebalanceNS).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + flotillav1.ReasonRebalanced})
			Expect(err).NotTo(HaveOccurred())
			Expect(evs.Items).To(BeEmpty(), "no pod was evicted to rebalance")
			out, err := flotillactl(ctx, "rebalance", "-n", rebalanceNS, "-l", "app=by-hand", "--dry-run")
			Expect(err).NotTo(HaveOccurred(), out)
			Expect(out).To(ContainSubstring("3 move(s) planned"))
			start := time.Now()
			out, err = flotillactl(ctx, "rebalance", "-n", rebalanceNS, "-l", "app=by-hand", "--timeout", "3m")
			Expect(err).NotTo(HaveOccurred(), out)
			AddReportEntry("flotillactl rebalance of 3 moves", time.Since(start).Round(time.Second).String())
			GinkgoWriter.Println(out)
			Eventually(func(g Gomega) {
				g.Expect(byHand(ctx, g, s1.Name)).To(Equal(3))
				g.Expect(byHand(ctx, g, s2.Name)).To(Equal(3))
			}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
			fewest, samples := sampler.stop()
			AddReportEntry("fewest Ready while rebalancing (of 6)", fmt.Sprintf("%d in %d samples", fewest, samples))
			Expect(fewest).To(BeNumerically(">=", 5), "the budget allows 1 unavailable of 6")
		}, SpecTimeout(5*time.Minute))
	})
})
