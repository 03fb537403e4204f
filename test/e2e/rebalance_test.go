package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// After a failover the pods stay where it put them; the manager with --rebalance-on-return brings
// them back by itself once the secondary has been back a while, one pod of a controller at a time
// through the Eviction API, within the workload's PodDisruptionBudget. Its return is an outage of
// its own (the manager runs with other flags); `flotillactl rebalance`, the same moves by hand,
// is asserted on the outage every feature shares (outage_test.go).
var _ = Describe("rebalance", Ordered, Serial, Label("disruptive"), func() {
	const ns = "rebalance"

	BeforeAll(func(ctx SpecContext) {
		joinBothSecondaries(ctx)
		enabledNamespace(ctx, ns)
	})

	// failedOverAndBack runs an elected Deployment of 6 (PDB maxUnavailable 1) split 3/3, stops
	// secondary1 until all 6 run in secondary2, starts it again, and returns a function that says
	// how many pods of it run in a cluster, and a sampler of the fewest Ready from then on.
	failedOverAndBack := func(ctx SpecContext, name string) (func(context.Context, Gomega, string) int, *readySampler) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		// The manager was just restarted: until its webhook places pods in both secondaries, all 6
		// would go to the one it knows first, and no split to come back to would exist.
		Eventually(func(g Gomega) {
			for _, c := range []string{s1.Name, s2.Name} {
				expectRunningAndReady(g, ctx, c)
				expectPlaceableIn(g, ctx, c)
			}
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		in := electedWithBudget(ctx, ns, name)
		Eventually(func(g Gomega) {
			g.Expect(in(ctx, g, s1.Name)).To(Equal(3))
			g.Expect(in(ctx, g, s2.Name)).To(Equal(3))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())

		// secondary1 away past --failover-after and the pods' 5 s: all 6 run in secondary2.
		startAgain := stopForSpec(ctx, s1)
		Eventually(func(g Gomega) {
			g.Expect(in(ctx, g, s2.Name)).To(Equal(6))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		startAgain(ctx)
		Eventually(func(g Gomega) { expectRunningAndReady(g, ctx, s1.Name) }).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		return in, startReadySampler(ctx, ns, "app="+name)
	}

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
			g.Expect(in(ctx, g, s1.Name)).To(Equal(3))
			g.Expect(in(ctx, g, s2.Name)).To(Equal(3))
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
