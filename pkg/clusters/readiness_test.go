package clusters

import (
	"testing"
	"time"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestReadinessWaitsForEveryClusterProbedOnce(t *testing.T) {
	probed := time.Unix(1000, 0)
	running := func(name string, synced bool) Snapshot {
		return Snapshot{Name: name, Role: RoleSecondary, Status: flotillav1.ClusterRunning, LastProbe: probed, CapacitySynced: synced}
	}
	tests := map[string]struct {
		configured bool
		snaps      []Snapshot
		ready      bool
	}{
		"registration not read":          {false, nil, false},
		"no cluster registered":          {true, nil, true},
		"a cluster not probed yet":       {true, []Snapshot{running("a", true), {Name: "b", Status: flotillav1.ClusterUnknown, Reason: flotillav1.ReasonProbing}}, false},
		"a Running secondary not synced": {true, []Snapshot{running("a", false)}, false},
		"every secondary synced":         {true, []Snapshot{running("a", true), running("b", true)}, true},
		"a dead secondary probed and reported": {true, []Snapshot{running("a", true),
			{Name: "b", Role: RoleSecondary, Status: flotillav1.ClusterUnknown, Reason: flotillav1.ReasonProbeFailed, LastProbe: probed}}, true},
		"an unusable context is never probed": {true, []Snapshot{{Name: "bad", Status: flotillav1.ClusterUnknown, Reason: flotillav1.ReasonInvalidContext}}, true},
	}
	for name, tc := range tests {
		if err := readiness(tc.configured, tc.snaps); (err == nil) != tc.ready {
			t.Errorf("%s: %v, want ready %v", name, err, tc.ready)
		}
	}
}
