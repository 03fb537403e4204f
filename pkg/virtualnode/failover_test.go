package virtualnode

import (
	"testing"
	"time"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

func TestUnreachable(t *testing.T) {
	now := time.Unix(10000, 0)
	snap := func(name string, status flotillav1.ClusterStatus, since time.Duration) clusters.Snapshot {
		return clusters.Snapshot{Name: name, Role: clusters.RoleSecondary, ID: "id-" + name, Status: status, LastTransition: now.Add(-since)}
	}
	up := flotillav1.ClusterRunning
	down := flotillav1.ClusterUnknown
	tests := map[string]struct {
		snaps []clusters.Snapshot
		want  []string
	}{
		"all up":                            {snaps: []clusters.Snapshot{snap("a", up, time.Hour), snap("b", up, time.Hour)}},
		"one of two down long enough":       {snaps: []clusters.Snapshot{snap("a", up, time.Hour), snap("b", down, time.Minute)}, want: []string{"b"}},
		"down, but not for long":            {snaps: []clusters.Snapshot{snap("a", up, time.Hour), snap("b", down, 10*time.Second)}},
		"both down: the primary is cut":     {snaps: []clusters.Snapshot{snap("a", down, time.Minute), snap("b", down, time.Minute)}},
		"two of three down: more than half": {snaps: []clusters.Snapshot{snap("a", up, time.Hour), snap("b", down, time.Minute), snap("c", down, time.Minute)}},
		"one of three down":                 {snaps: []clusters.Snapshot{snap("a", up, time.Hour), snap("b", up, time.Minute), snap("c", down, time.Minute)}, want: []string{"c"}},
		"only secondary down":               {snaps: []clusters.Snapshot{snap("a", down, time.Minute)}},
		// Another cluster answers at b's address: its proxies are not failed over, its delegates
		// may still run in the cluster that was b.
		"identity changed is not dead": {snaps: []clusters.Snapshot{snap("a", up, time.Hour), snap("b", up, time.Hour), func() clusters.Snapshot {
			s := snap("c", down, time.Minute)
			s.Reason = flotillav1.ReasonIdentityChanged
			return s
		}()}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Unreachable(tc.snaps, now, 30*time.Second)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for _, n := range tc.want {
				if !got[n] {
					t.Errorf("%s not tainted: %v", n, got)
				}
			}
		})
	}
}
