package clusters

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestReadinessWaitsForEveryClusterProbedOnce(t *testing.T) {
	probed := time.Unix(1000, 0)
	running := func(name string, synced bool) Snapshot {
		return Snapshot{Name: name, Role: RoleSecondary, Status: flotillav1.ClusterRunning, LastProbe: probed, CapacitySynced: synced,
			LastTransition: probed}
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
		if err := readiness(tc.configured, tc.snaps, probed.Add(time.Second), 30*time.Second); (err == nil) != tc.ready {
			t.Errorf("%s: %v, want ready %v", name, err, tc.ready)
		}
	}
}

// A secondary whose LIST never completes (20,000 pods behind a slow link) is waited for at start
// only until the deadline: the other clusters' elected pods are not refused meanwhile.
func TestReadinessWaitsForASecondaryOnlyUntilItsDeadline(t *testing.T) {
	up := time.Unix(1000, 0)
	slow := Snapshot{Name: "slow", Role: RoleSecondary, Status: flotillav1.ClusterRunning, LastProbe: up, LastTransition: up}
	fast := slow
	fast.Name, fast.CapacitySynced = "fast", true
	if err := readiness(true, []Snapshot{fast, slow}, up.Add(29*time.Second), 30*time.Second); err == nil {
		t.Error("ready before the slow secondary's deadline")
	}
	if err := readiness(true, []Snapshot{fast, slow}, up.Add(30*time.Second), 30*time.Second); err != nil {
		t.Errorf("still waiting past the deadline: %v", err)
	}
}

// Once Ready, a replica stays ready whatever one secondary does: comes back and relists, or
// never syncs again. (Every replica left the webhook's Service 9 s after a secondary came back.)
func TestOnceReadyReadinessNeverDependsOnOneSecondary(t *testing.T) {
	now := time.Now()
	r := NewRegistry(Options{PrimaryID: "p"}, logr.Discard())
	r.mu.Lock()
	r.configured = true
	r.mu.Unlock()
	if err := r.Ready(); err != nil {
		t.Fatalf("no cluster registered: %v", err)
	}
	// A secondary registered and Running whose capacity is not synced (it came back and relists).
	c := &cluster{registry: r, name: "back", state: Snapshot{Name: "back", Role: RoleSecondary, Status: flotillav1.ClusterRunning,
		LastProbe: now, LastTransition: now}}
	r.mu.Lock()
	r.clusters["back"] = c
	r.mu.Unlock()
	if err := r.Ready(); err != nil {
		t.Fatalf("a Ready replica became unready for one secondary: %v", err)
	}
}

// A secondary that answers again keeps the informers whose watch never failed (no relist of
// every pod on every replica), restarts those that did, and serves the capacity it knew until the
// new watch syncs.
func TestASecondaryBackRestartsOnlyFailedWatchesAndKeepsItsCapacity(t *testing.T) {
	stopped := 0
	watch := func(failed bool) *capacityWatch {
		w := &capacityWatch{cancel: func() { stopped++ }, synced: true, last: Capacity{NodeCount: 3}}
		w.failed.Store(failed)
		return w
	}
	c := &cluster{name: "back", state: Snapshot{Name: "back", Role: RoleSecondary, Status: flotillav1.ClusterRunning}}
	c.capacity = watch(false)
	c.restartWatches(logr.Discard())
	if stopped != 0 || c.capacity == nil {
		t.Fatal("a watch that never failed was restarted")
	}
	c.capacity = watch(true)
	c.restartWatches(logr.Discard())
	if stopped != 1 || c.capacity != nil {
		t.Fatal("a failed watch was kept")
	}
	if s := c.snapshot(); !s.CapacitySynced || s.Capacity.NodeCount != 3 {
		t.Fatalf("the capacity it knew does not serve until the new watch syncs: %+v", s)
	}
	c.capacity = &capacityWatch{cancel: func() {}, synced: true, last: Capacity{NodeCount: 4}}
	if s := c.snapshot(); s.Capacity.NodeCount != 4 {
		t.Fatalf("the new watch's capacity does not serve once synced: %+v", s)
	}
	// A server that went away (a probe met a refused connection) broke the watches, though a
	// reflector retries that quietly, backing off: restarted. (Seen: a secondary restarted kept
	// its old capacity, cordoned nodes and all, for over 30 s.)
	c.capacity = watch(false)
	c.connectionLost = connectionLost(&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED})
	c.restartWatches(logr.Discard())
	if stopped != 2 || c.capacity != nil || c.connectionLost {
		t.Fatalf("a watch of a server that went away was kept (stopped %d)", stopped)
	}
}
