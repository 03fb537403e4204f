package webhook

import (
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

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
			views := []ClusterView{{Name: "a"}, {Name: "b"}, {Name: "c"}}
			feasible := []string{"a", "b", "c"}
			for range tc.pods {
				next := weightedNext(feasible, views, tc.weights)
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

// A spread over clusters stays on the proxy for the primary's scheduler (which then binds it);
// one inside the secondary (zone, hostname) is the delegate's, and the webhook binds the proxy.
func TestSpreadConstraintsGoWhereTheirKeyIs(t *testing.T) {
	overClusters := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: flotillav1.LabelCluster, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	overZones := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway}
	choose := Options{Choose: func([]int64) int { return 0 }}

	pod := elected(func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{overClusters, overZones}
	})
	out, err := Mutate(pod, twoClusters, choose)
	if err != nil {
		t.Fatal(err)
	}
	if out.Spec.NodeName != "" {
		t.Errorf("bound to %s: a spread over clusters is the primary scheduler's to apply", out.Spec.NodeName)
	}
	if len(out.Spec.TopologySpreadConstraints) != 1 || out.Spec.TopologySpreadConstraints[0].TopologyKey != flotillav1.LabelCluster {
		t.Errorf("proxy's constraints %+v, want the one over clusters", out.Spec.TopologySpreadConstraints)
	}
	var c translate.Constraints
	if err := json.Unmarshal([]byte(out.Annotations[flotillav1.AnnotationDelegateConstraints]), &c); err != nil {
		t.Fatal(err)
	}
	if len(c.TopologySpreadConstraints) != 1 || c.TopologySpreadConstraints[0].TopologyKey != corev1.LabelTopologyZone {
		t.Errorf("delegate's constraints %+v, want the one over zones", c.TopologySpreadConstraints)
	}

	zonesOnly := elected(func(p *corev1.Pod) { p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{overZones} })
	out, err = Mutate(zonesOnly, twoClusters, choose)
	if err != nil {
		t.Fatal(err)
	}
	if out.Spec.NodeName == "" || len(out.Spec.TopologySpreadConstraints) != 0 {
		t.Errorf("node %q, proxy constraints %+v: want bound, none", out.Spec.NodeName, out.Spec.TopologySpreadConstraints)
	}
}
