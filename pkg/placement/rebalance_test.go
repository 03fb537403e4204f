package placement_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/placement/placementtest"
)

// proxiesIn makes n bound proxies of one ReplicaSet per cluster, in order of creation.
func proxiesIn(counts map[string]int, opts ...placementtest.PodOpt) []*corev1.Pod {
	var out []*corev1.Pod
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []string{"eu", "us", "asia"} {
		for i := range counts[c] {
			p := placementtest.Elected(opts...)
			p.Name = fmt.Sprintf("web-%s-%d", c, i)
			p.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(len(out)) * time.Minute))
			p.Spec.NodeName = flotillav1.VirtualNodeName(c)
			out = append(out, p)
		}
	}
	return out
}

func TestRebalance(t *testing.T) {
	three := append(append([]placement.ClusterView(nil), twoClusters...), placementtest.ClusterOf("asia", true, "4", nil))
	tests := map[string]struct {
		have      map[string]int
		clusters  []placement.ClusterView
		opts      []placementtest.PodOpt
		want      map[string]int
		moves     int
		movesFrom map[string]int
		pinned    int
	}{
		"6 after a failover, the cluster back: 3 and 3, three moves": {
			have: map[string]int{"us": 6}, clusters: twoClusters, want: map[string]int{"eu": 3, "us": 3}, moves: 3, movesFrom: map[string]int{"us": 3},
		},
		"already even: nothing moves": {
			have: map[string]int{"eu": 3, "us": 3}, clusters: twoClusters, want: map[string]int{"eu": 3, "us": 3},
		},
		"an odd count keeps its remainder where it is": {
			have: map[string]int{"eu": 1, "us": 4}, clusters: twoClusters, want: map[string]int{"eu": 2, "us": 3}, moves: 1, movesFrom: map[string]int{"us": 1},
		},
		"a cordoned cluster is over its share, all of it": {
			have: map[string]int{"eu": 2, "us": 2}, clusters: []placement.ClusterView{placementtest.Cordoned(twoClusters[0]), twoClusters[1]},
			want: map[string]int{"us": 4}, moves: 2, movesFrom: map[string]int{"eu": 2},
		},
		"a cluster away takes no share": {
			have: map[string]int{"us": 4}, clusters: []placement.ClusterView{placementtest.ClusterOf("eu", false, "4", nil), twoClusters[1]},
			want: map[string]int{"us": 4},
		},
		"weights 70/30 over 10": {
			have: map[string]int{"eu": 5, "us": 5}, clusters: twoClusters, opts: []placementtest.PodOpt{placementtest.Annotate(flotillav1.AnnotationClusterWeights, "eu=70,us=30")},
			want: map[string]int{"eu": 7, "us": 3}, moves: 2, movesFrom: map[string]int{"us": 2},
		},
		"three clusters, one new and empty": {
			have: map[string]int{"eu": 3, "us": 3}, clusters: three, want: map[string]int{"eu": 2, "us": 2, "asia": 2}, moves: 2,
			movesFrom: map[string]int{"eu": 1, "us": 1},
		},
		"pods whose claims hold data stay": {
			have: map[string]int{"us": 4}, clusters: twoClusters, opts: []placementtest.PodOpt{placementtest.WithClaims("data")},
			want: map[string]int{"eu": 2, "us": 2}, pinned: 4,
		},
		"the pod's clusters annotation: its clusters only": {
			have: map[string]int{"eu": 2, "us": 2}, clusters: three, opts: []placementtest.PodOpt{placementtest.Annotate(flotillav1.AnnotationClusters, "eu,us")},
			want: map[string]int{"eu": 2, "us": 2},
		},
		"a full cluster the pods already run in keeps its share": {
			have: map[string]int{"eu": 2, "us": 2}, clusters: []placement.ClusterView{placementtest.ClusterOf("eu", true, "0", nil), twoClusters[1]},
			want: map[string]int{"eu": 2, "us": 2},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			split, err := placement.Rebalance(t.Context(), proxiesIn(tc.have, tc.opts...), tc.clusters)
			if err != nil {
				t.Fatal(err)
			}
			for c, n := range tc.want {
				if split.Want[c] != n {
					t.Errorf("want[%s] = %d, want %d (%v)", c, split.Want[c], n, split.Want)
				}
			}
			if len(split.Moves) != tc.moves || len(split.Pinned) != tc.pinned {
				t.Fatalf("%d moves, %d pinned; want %d, %d: %+v", len(split.Moves), len(split.Pinned), tc.moves, tc.pinned, split.Moves)
			}
			from := map[string]int{}
			for _, m := range split.Moves {
				from[m.From]++
				if m.From == m.To {
					t.Errorf("a move within %s", m.From)
				}
				if c, _ := flotillav1.ClusterOfNode(m.Pod.Spec.NodeName); c != m.From {
					t.Errorf("move of %s from %s, which runs in %s", m.Pod.Name, m.From, c)
				}
			}
			for c, n := range tc.movesFrom {
				if from[c] != n {
					t.Errorf("%d moves from %s, want %d", from[c], c, n)
				}
			}
		})
	}
}

// The newest pods of a cluster move first: those that have run the least.
func TestRebalanceMovesTheNewestFirst(t *testing.T) {
	split, err := placement.Rebalance(t.Context(), proxiesIn(map[string]int{"us": 4}), twoClusters)
	if err != nil {
		t.Fatal(err)
	}
	if len(split.Moves) != 2 || split.Moves[0].Pod.Name != "web-us-3" || split.Moves[1].Pod.Name != "web-us-2" {
		t.Fatalf("moves = %+v, want web-us-3 then web-us-2", split.Moves)
	}
}
