package placement_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/placement/placementtest"
)

// The whole decision, table by table: which clusters a proxy fits, which its affinity names,
// whether it waits gated, the spread it keeps, and where it is bound.
func TestDecidePlacement(t *testing.T) {
	pickFirst := func([]int64) int { return 0 }
	overClusters := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: flotillav1.LabelCluster, WhenUnsatisfiable: corev1.DoNotSchedule}
	withSiblings := func(eu, us int) []placement.ClusterView {
		out := []placement.ClusterView{twoClusters[0], twoClusters[1]}
		out[0].Siblings, out[1].Siblings = eu, us
		return out
	}
	tests := map[string]struct {
		pod      *corev1.Pod
		clusters []placement.ClusterView
		choose   func([]int64) int
		want     placement.Decision
		// wantWhy is in the decision's why (which is empty when wantWhy is).
		wantWhy string
	}{
		"bound to the chosen feasible cluster": {pod: placementtest.Elected(), clusters: twoClusters, choose: pickFirst,
			want: placement.Decision{Fit: placement.Fit{Feasible: []string{"eu", "us"}}, Affinity: []string{"eu", "us"}, Cluster: "eu"}},
		"without choose the scheduler picks": {pod: placementtest.Elected(), clusters: twoClusters,
			want: placement.Decision{Fit: placement.Fit{Feasible: []string{"eu", "us"}}, Affinity: []string{"eu", "us"}}},
		"full everywhere: waits for every cluster, unbound": {pod: placementtest.Elected(placementtest.CPU("64")), clusters: twoClusters, choose: pickFirst,
			want:    placement.Decision{Fit: placement.Fit{Waiting: []string{"eu", "us"}}, Affinity: []string{"eu", "us"}},
			wantWhy: "no cluster fits now: eu: node eu-n0 has only cpu 4 free of 64 requested; us: node us-n0 has only cpu 1 free of 64 requested"},
		"no node matches: gated, no cluster named": {pod: placementtest.Elected(func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zz": "yes"} }),
			clusters: twoClusters, choose: pickFirst, want: placement.Decision{Gated: true}, wantWhy: "does not match the pod's node selector"},
		"a spread over clusters keeps the cluster that is away and is not bound": {
			pod: placementtest.Elected(func(p *corev1.Pod) {
				p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{overClusters}
			}),
			clusters: []placement.ClusterView{placementtest.ClusterOf("eu", false, "4", nil), twoClusters[1]}, choose: pickFirst,
			want: placement.Decision{Fit: placement.Fit{Feasible: []string{"us"}, Waiting: []string{"eu"}}, Affinity: []string{"eu", "us"},
				Spread: []corev1.TopologySpreadConstraint{overClusters}}},
		"a cluster that lends the primary no more pods waits; the pod goes to the other": {pod: placementtest.Elected(), clusters: func() []placement.ClusterView {
			c := withSiblings(0, 5)
			c[0].Lent = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0"), corev1.ResourceCPU: resource.MustParse("8")}
			return c
		}(), choose: pickFirst,
			want: placement.Decision{Fit: placement.Fit{Feasible: []string{"us"}, Waiting: []string{"eu"}}, Affinity: []string{"us"}, Cluster: "us"}},
		"fewest siblings first": {pod: placementtest.Elected(), clusters: withSiblings(2, 1), choose: pickFirst,
			want: placement.Decision{Fit: placement.Fit{Feasible: []string{"eu", "us"}}, Affinity: []string{"eu", "us"}, Cluster: "us"}},
		"weights before fewest siblings": {pod: placementtest.Elected(placementtest.Annotate(flotillav1.AnnotationClusterWeights, "eu=3,us=1")), clusters: withSiblings(2, 1),
			choose: pickFirst, want: placement.Decision{Fit: placement.Fit{Feasible: []string{"eu", "us"}}, Affinity: []string{"eu", "us"}, Cluster: "eu"}},
		"a cordoned (drained) cluster is neither bound nor in the affinity, though it holds the fewest siblings": {
			pod: placementtest.Elected(), clusters: func() []placement.ClusterView {
				c := withSiblings(0, 5)
				c[0].Cordoned = true
				return c
			}(), choose: pickFirst,
			want: placement.Decision{Fit: placement.Fit{Feasible: []string{"us"}, Waiting: []string{"eu"}}, Affinity: []string{"us"}, Cluster: "us"}},
		"a pod Kueue queues waits gated, to be placed once Kueue admits it, where its flavor says": {
			pod:      placementtest.Elected(func(p *corev1.Pod) { p.Labels = map[string]string{flotillav1.LabelKueueQueueName: "team-a"} }),
			clusters: twoClusters, choose: pickFirst,
			want: placement.Decision{Fit: placement.Fit{Feasible: []string{"eu", "us"}}, Gated: true}},
		"a pod with scheduling gates is left to the scheduler": {
			pod:      placementtest.Elected(func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "wait"}} }),
			clusters: twoClusters, choose: pickFirst,
			want: placement.Decision{Fit: placement.Fit{Feasible: []string{"eu", "us"}}, Affinity: []string{"eu", "us"}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := placement.Decide(t.Context(), tc.pod, placement.DelegateConstraints(tc.pod), tc.clusters, tc.choose)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got.Why, tc.wantWhy) || (tc.wantWhy == "") != (got.Why == "") {
				t.Errorf("why %q, want it to contain %q", got.Why, tc.wantWhy)
			}
			got.Why = ""
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("placement %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDecidePlacementRefusesWhatItCannotHonour(t *testing.T) {
	overClusters := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: flotillav1.LabelCluster, WhenUnsatisfiable: corev1.DoNotSchedule}
	for name, tc := range map[string]struct {
		pod      *corev1.Pod
		clusters []placement.ClusterView
		want     string
	}{
		"no cluster registered": {placementtest.Elected(), nil, "no secondary cluster is registered"},
		"no cluster chosen": {placementtest.Elected(placementtest.Annotate(flotillav1.AnnotationClusterSelector, flotillav1.LabelRegion+"=region-mars")), twoClusters,
			"matches no registered cluster"},
		"weights beside a spread over clusters": {placementtest.Elected(placementtest.Annotate(flotillav1.AnnotationClusterWeights, "eu=1"), func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{overClusters}
		}), twoClusters, "cannot be combined with a topologySpreadConstraint"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := placement.Decide(t.Context(), tc.pod, placement.DelegateConstraints(tc.pod), tc.clusters, nil)
			var rej *placement.Rejection
			if !errors.As(err, &rej) || !strings.Contains(rej.Message, tc.want) {
				t.Fatalf("err = %v, want a rejection containing %q", err, tc.want)
			}
		})
	}
}

func TestWeightedRandomNeverPicksOutsideItsWeights(t *testing.T) {
	for i := 0; i < 200; i++ {
		if got := placement.WeightedRandom([]int64{0, 5, 0}); got != 1 {
			t.Fatalf("picked %d with weights 0,5,0", got)
		}
	}
	counts := make([]int, 2)
	for i := 0; i < 2000; i++ {
		counts[placement.WeightedRandom([]int64{1, 1})]++
	}
	if counts[0] == 0 || counts[1] == 0 {
		t.Errorf("equal weights never spread: %v", counts)
	}
	if got := placement.WeightedRandom(nil); got != 0 {
		t.Errorf("no weights: %d", got)
	}
}

// Pods of one controller placed one after the other by weightedNext end in proportion to the
// weights, within one pod per cluster, whatever the counts they start from.
func TestWeightedNextSplitsInProportion(t *testing.T) {
	for _, tc := range []struct {
		weights map[string]int64
		pods    int
		want    map[string]int
	}{
		{map[string]int64{"a": 70, "b": 30}, 10, map[string]int{"a": 7, "b": 3}},
		{map[string]int64{"a": 7, "b": 3}, 100, map[string]int{"a": 70, "b": 30}},
		{map[string]int64{"a": 50, "b": 30, "c": 20}, 10, map[string]int{"a": 5, "b": 3, "c": 2}},
		{map[string]int64{"a": 1, "b": 1}, 7, map[string]int{"a": 4, "b": 3}},
		{map[string]int64{"a": 1, "b": 0}, 5, map[string]int{"a": 5}},
	} {
		t.Run(fmt.Sprint(tc.weights), func(t *testing.T) {
			views := []placement.ClusterView{{Name: "a"}, {Name: "b"}, {Name: "c"}}
			feasible := []string{"a", "b", "c"}
			for range tc.pods {
				next := placement.WeightedNext(feasible, views, tc.weights)
				for i := range views {
					if views[i].Name == next[0] { // the first of a tie: Choose would pick among them
						views[i].Siblings++
					}
				}
			}
			for _, v := range views {
				if v.Siblings != tc.want[v.Name] {
					t.Errorf("%s holds %d, want %d (all: %+v)", v.Name, v.Siblings, tc.want[v.Name], views)
				}
			}
		})
	}
}

// A GPU pod is judged per node: 8 free GPUs as 8 nodes of one never run a pod that needs 4, so
// that cluster is neither feasible nor waited for (the primary's scheduler, seeing its sum on
// the virtual node, would bind it there); a node of 4 whose GPUs are taken is waited for.
func TestGPUsAreJudgedPerNodeNeverByTheirSum(t *testing.T) {
	const gpu = corev1.ResourceName("nvidia.com/gpu")
	gpuNode := func(name, free, total string) placement.NodeView {
		return placement.NodeView{Name: name, Free: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), gpu: resource.MustParse(free)},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), gpu: resource.MustParse(total)}}
	}
	many := placement.ClusterView{Name: "eu", Ready: true, Labels: map[string]string{flotillav1.LabelCluster: "eu"}}
	// Nodes without GPUs come first in the cluster's list; the reason names the closer ones first.
	for i := range 3 {
		many.Nodes = append(many.Nodes, gpuNode(fmt.Sprintf("eu-cpu%d", i), "0", "0"))
	}
	for i := range 8 {
		many.Nodes = append(many.Nodes, gpuNode(fmt.Sprintf("eu-g%d", i), "1", "1"))
	}
	big := func(free string) placement.ClusterView {
		return placement.ClusterView{Name: "us", Ready: true, Labels: map[string]string{flotillav1.LabelCluster: "us"}, Nodes: []placement.NodeView{gpuNode("us-g0", free, "4")}}
	}
	four := placementtest.Elected(func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{gpu: resource.MustParse("4")}
	})
	got, err := placement.Decide(t.Context(), four, placement.DelegateConstraints(four), []placement.ClusterView{many, big("4")}, func([]int64) int { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	if got.Cluster != "us" || !reflect.DeepEqual(got.Feasible, []string{"us"}) || len(got.Waiting) != 0 {
		t.Errorf("free node of 4: %+v, want bound to us alone", got)
	}
	got, err = placement.Decide(t.Context(), four, placement.DelegateConstraints(four), []placement.ClusterView{many, big("0")}, func([]int64) int { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	if got.Cluster != "" || len(got.Feasible) != 0 || !reflect.DeepEqual(got.Waiting, []string{"us"}) || !reflect.DeepEqual(got.Affinity, []string{"us"}) {
		t.Errorf("node of 4 taken: %+v, want waiting for us alone", got)
	}
	for _, want := range []string{"eu: node eu-g0 has in all only nvidia.com/gpu 1 of 4 requested, node eu-g1", "and 8 more nodes", "us: node us-g0 has only nvidia.com/gpu 0 free of 4 requested"} {
		if !strings.Contains(got.Why, want) {
			t.Errorf("why %q lacks %q", got.Why, want)
		}
	}
}
