package replicator

import (
	"testing"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// An object whose removal failed stays listed as applied in its cluster, so the next pass removes
// it again instead of forgetting it.
func TestKeepListedKeepsAFailedRemovalInItsCluster(t *testing.T) {
	results := []placeResult{{sync: flotillav1.ClusterSync{Name: "primary"}}, {sync: flotillav1.ClusterSync{Name: "eu"},
		applied: []flotillav1.AppliedResource{{Cluster: "eu", Kind: "ConfigMap", Name: "kept"}}}}
	keepListed(results, flotillav1.AppliedResource{Cluster: "eu", Kind: "Service", Name: "old"})
	keepListed(results, flotillav1.AppliedResource{Cluster: "gone", Kind: "Service", Name: "x"})
	if got := results[1].applied; len(got) != 2 || got[1].Name != "old" {
		t.Errorf("eu applied = %+v, want kept and old", got)
	}
	if len(results[0].applied) != 0 {
		t.Errorf("primary applied = %+v, want none", results[0].applied)
	}
}
