package replicator

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// A target outside the replication namespace's cluster sets is reported as denied, with the
// sets' reason; an unknown name as unknown.
func TestSyncedSaysWhyATargetIsLeftOut(t *testing.T) {
	applied := []placeResult{{sync: flotillav1.ClusterSync{Name: PrimaryName, Synced: true}}, {sync: flotillav1.ClusterSync{Name: "eu", Synced: true}}}
	for _, tc := range []struct {
		name         string
		res          clusters.Resolution
		reason, text string
	}{
		{"denied", clusters.Resolution{Clusters: []string{"eu"}, Denied: []string{"us: not in the ClusterSets bound to namespace shop (europe)"}},
			flotillav1.ReasonTargetDenied, "targetCluster: us: not in the ClusterSets bound to namespace shop (europe)"},
		{"unknown and denied", clusters.Resolution{Clusters: []string{"eu"}, Unknown: []string{"atlantis"}, Denied: []string{"us: no"}},
			flotillav1.ReasonUnknownTargets, "targetCluster: unknown cluster(s) atlantis; us: no"},
		{"none", clusters.Resolution{Clusters: []string{"eu"}}, flotillav1.ReasonSynced, "Applied in 2 cluster(s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &flotillav1.Replicator{}
			setStatus(rep, applied, tc.res)
			c := meta.FindStatusCondition(rep.Status.Conditions, flotillav1.ConditionSynced)
			if c == nil || c.Reason != tc.reason || c.Message != tc.text {
				t.Errorf("Synced %+v, want %s: %q", c, tc.reason, tc.text)
			}
		})
	}
}
