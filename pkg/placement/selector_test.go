package placement_test

import (
	"reflect"
	"testing"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// A node selector on the virtual nodes' labels chooses clusters, as Kueue's flavor assignment
// writes it (flotilla.dev/cluster: s2); the delegate keeps the rest of the selector only, which
// the secondary's nodes can match.
func TestANodeSelectorOnTheVirtualNodesLabelsChoosesClusters(t *testing.T) {
	clusters := []placement.ClusterView{gangCluster("s1", 8), gangCluster("s2", 8)}
	pod := members(1, 1, nil)[0]
	pod.Spec.NodeSelector = map[string]string{flotillav1.LabelCluster: "s2", "disk": "ssd"}
	c := placement.DelegateConstraints(pod)
	if !reflect.DeepEqual(c.NodeSelector, map[string]string{"disk": "ssd"}) {
		t.Errorf("the delegate's node selector = %v", c.NodeSelector)
	}
	c.NodeSelector = nil // the fake nodes carry no disk label
	d, err := placement.Decide(t.Context(), pod, c, clusters, func([]int64) int { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.Feasible, []string{"s2"}) || d.Cluster != "s2" {
		t.Errorf("decision = %+v", d)
	}
	pod.Spec.NodeSelector = map[string]string{flotillav1.LabelCluster: "nowhere"}
	d, err = placement.Decide(t.Context(), pod, translate.Constraints{}, clusters, nil)
	if err == nil && len(d.Feasible) > 0 {
		t.Errorf("a selector no cluster matches: %+v", d)
	}
	if placement.NodeSelectorInCluster(map[string]string{flotillav1.LabelRegion: "eu"}) != nil {
		t.Error("a selector of virtual-node labels alone leaves the delegate none")
	}
}
