package webhook

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestMutateBindsTheProxyToTheChosenFeasibleCluster(t *testing.T) {
	var seen []int64
	pickLast := func(w []int64) int { seen = w; return len(w) - 1 }
	gated := func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "wait"}} }
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		choose   func([]int64) int
		wantNode string
	}{
		{"bound to the chosen cluster", elected(), pickLast, flotillav1.VirtualNodeName("us")},
		{"only feasible clusters are offered", elected(cpu("2")), pickLast, flotillav1.VirtualNodeName("eu")},
		{"scheduler placement when Choose is unset", elected(), nil, ""},
		{"scheduling gates are left to the scheduler", elected(gated), pickLast, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Mutate(tc.pod, twoClusters, Options{Choose: tc.choose})
			if err != nil {
				t.Fatal(err)
			}
			if out.Spec.NodeName != tc.wantNode {
				t.Errorf("nodeName %q, want %q", out.Spec.NodeName, tc.wantNode)
			}
			if got := feasibleOf(t, out); tc.wantNode != "" && !hasString(got, tc.wantNode[len(flotillav1.VirtualNodePrefix):]) {
				t.Errorf("bound outside its own affinity %v", got)
			}
		})
	}
	seen = nil
	if _, err := Mutate(elected(), twoClusters, Options{Choose: pickLast}); err != nil {
		t.Fatal(err)
	}
	// eu has 4 CPUs free, us 1 (see clusterOf): weights follow free CPU.
	if len(seen) != 2 || seen[0] <= seen[1] || seen[1] < 1 {
		t.Errorf("weights %v, want eu's above us's and every weight at least 1", seen)
	}
}

func TestWeightedRandomNeverPicksOutsideItsWeights(t *testing.T) {
	for i := 0; i < 200; i++ {
		if got := WeightedRandom([]int64{0, 5, 0}); got != 1 {
			t.Fatalf("picked %d with weights 0,5,0", got)
		}
	}
	counts := make([]int, 2)
	for i := 0; i < 2000; i++ {
		counts[WeightedRandom([]int64{1, 1})]++
	}
	if counts[0] == 0 || counts[1] == 0 {
		t.Errorf("equal weights never spread: %v", counts)
	}
	if got := WeightedRandom(nil); got != 0 {
		t.Errorf("no weights: %d", got)
	}
}

func TestMutatePlacesAmongTheClustersWithFewestSiblings(t *testing.T) {
	withSiblings := func(eu, us int) []ClusterView {
		out := []ClusterView{twoClusters[0], twoClusters[1]}
		out[0].Siblings, out[1].Siblings = eu, us
		return out
	}
	pickFirst := func([]int64) int { return 0 }
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		clusters []ClusterView
		wantNode string
	}{
		{"fewer siblings beats more free CPU", elected(), withSiblings(2, 1), "us"},
		{"a tie leaves the choice to capacity", elected(), withSiblings(1, 1), "eu"},
		{"no siblings anywhere: capacity", elected(), withSiblings(0, 0), "eu"},
		{"an infeasible cluster is never chosen for its few siblings", elected(cpu("2")), withSiblings(5, 0), "eu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Mutate(tc.pod, tc.clusters, Options{Choose: pickFirst})
			if err != nil {
				t.Fatal(err)
			}
			if want := flotillav1.VirtualNodeName(tc.wantNode); out.Spec.NodeName != want {
				t.Errorf("nodeName %q, want %q", out.Spec.NodeName, want)
			}
		})
	}
}
