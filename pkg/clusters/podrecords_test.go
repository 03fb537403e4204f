package clusters

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// heldPodRecords is how many pod records a capacity watch holds.
func heldPodRecords(w *capacityWatch) int { return len(w.pods.ListKeys()) }

// A secondary whose pods outnumber what its nodes can run (here 1,500 pods bound to a node that
// does not exist, and 1,500 that no node took) does not put a record of each into the manager:
// unbound pods take room nowhere and are not kept, bound ones at most up to the limit, and the
// capacity offers nothing rather than what it cannot account for. (The fake clientset ignores
// field selectors: the unbound pods reach the watch here, as they never do from an API server.)
func TestCapacityWatchHoldsABoundedNumberOfPodRecords(t *testing.T) {
	const perGroup = 1500
	objs := []runtime.Object{node("n1", "4", "8Gi")}
	for i := range perGroup {
		gone := pod(fmt.Sprintf("gone-%d", i), "missing-node", "100m", "64Mi")
		gone.Namespace = "ns"
		unbound := pod(fmt.Sprintf("pending-%d", i), "", "100m", "64Mi")
		unbound.Namespace, unbound.Status.Phase = "ns", corev1.PodPending
		objs = append(objs, gone, unbound)
	}
	cs := fake.NewClientset(objs...)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w := startCapacityWatch(ctx, logr.Discard(), cs, "me", func() {})
	defer w.stop()
	if err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		_, synced := w.current()
		return synced, nil
	}); err != nil {
		t.Fatal("the capacity watch did not sync")
	}
	// One node of 110 pods, and the slack every secondary gets.
	const limit = 110 + 1000
	if held := heldPodRecords(w); held != limit {
		t.Errorf("the watch holds %d pod records, want %d: as many of the bound pods as the limit lets in", held, limit)
	}
	c, _ := w.current()
	if free := c.Allocatable.Cpu(); !free.IsZero() {
		t.Errorf("a secondary over the limit offers cpu %s, want nothing", free.String())
	}
	if !c.PodsOverLimit || c.Capacity.Cpu().Cmp(resource.MustParse("4")) != 0 {
		t.Errorf("the capacity does not say its pods are over the limit, or lost its nodes': %+v", c)
	}
	if w.relistDue(time.Now()) || !w.relistDue(time.Now().Add(podRecordsRelistInterval)) {
		t.Error("a watch over the limit is not listed again after podRecordsRelistInterval, and only then")
	}
}

// The watch lists and watches only the pods that take room on a node: bound to one, not finished.
// (An API server evaluates the selector on a pod's spec.nodeName and status.phase.)
func TestCapacityWatchSelectsBoundUnfinishedPods(t *testing.T) {
	sel, err := fields.ParseSelector(boundPods)
	if err != nil {
		t.Fatalf("the pods' field selector %q does not parse: %v", boundPods, err)
	}
	if boundPods != "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed" {
		t.Errorf("the pods' field selector is %q", boundPods)
	}
	tests := []struct {
		node  string
		phase corev1.PodPhase
		want  bool
	}{
		{"n1", corev1.PodRunning, true},
		{"n1", corev1.PodPending, true},
		{"n1", corev1.PodUnknown, true},
		{"missing-node", corev1.PodPending, true},
		{"", corev1.PodPending, false},
		{"n1", corev1.PodSucceeded, false},
		{"n1", corev1.PodFailed, false},
	}
	for _, tc := range tests {
		got := sel.Matches(fields.Set{"spec.nodeName": tc.node, "status.phase": string(tc.phase)})
		if got != tc.want {
			t.Errorf("a %s pod on node %q: selected %v, want %v", tc.phase, tc.node, got, tc.want)
		}
	}
}

func TestPodRecordLimit(t *testing.T) {
	withPods := func(n string) nodeOpt {
		return func(o *corev1.Node) { o.Status.Allocatable[corev1.ResourcePods] = resource.MustParse(n) }
	}
	noPods := func(o *corev1.Node) { delete(o.Status.Allocatable, corev1.ResourcePods) }
	tests := map[string]struct {
		nodes []*corev1.Node
		want  int
	}{
		"no nodes: the slack":                  {nil, 1000},
		"110 a node":                           {[]*corev1.Node{node("a", "1", "1Gi"), node("b", "1", "1Gi")}, 1220},
		"a node's state does not matter":       {[]*corev1.Node{node("a", "1", "1Gi", notReady), node("b", "1", "1Gi", cordoned), node("c", "1", "1Gi", virtual)}, 1330},
		"a node's own figure":                  {[]*corev1.Node{node("a", "1", "1Gi", withPods("250"))}, 1250},
		"no figure, or a negative one, is nil": {[]*corev1.Node{node("a", "1", "1Gi", noPods), node("b", "1", "1Gi", withPods("-5"))}, 1000},
		"at most maxPodRecords":                {[]*corev1.Node{node("a", "1", "1Gi", withPods("1e12")), node("b", "1", "1Gi")}, maxPodRecords},
	}
	for name, tc := range tests {
		if got := podRecordLimit(tc.nodes); got != tc.want {
			t.Errorf("%s: limit %d, want %d", name, got, tc.want)
		}
	}
}

func TestAdmitPodRecord(t *testing.T) {
	tests := []struct {
		bound, held  bool
		count, limit int
		want         podAdmission
	}{
		{bound: false, count: 0, limit: 10, want: ignorePod},
		{bound: false, held: true, count: 10, limit: 10, want: ignorePod},
		{bound: true, count: 9, limit: 10, want: admitPod},
		{bound: true, count: 10, limit: 10, want: refusePod},
		{bound: true, count: 12, limit: 10, want: refusePod},
		{bound: true, held: true, count: 10, limit: 10, want: admitPod},
		{bound: true, held: true, count: 12, limit: 10, want: admitPod},
	}
	for _, tc := range tests {
		if got := admitPodRecord(tc.bound, tc.held, tc.count, tc.limit); got != tc.want {
			t.Errorf("%+v: %d", tc, got)
		}
	}
}

// The records keep what is admitted; a refusal is remembered until the records are listed anew,
// held records are still updated and deleted, and a change of the nodes reads the limit again.
func TestPodRecordsStayWithinTheirLimit(t *testing.T) {
	limit := 2
	s := newPodRecords(func() int { return limit })
	slim := &capacitySlim{primaryID: "me"}
	offer := func(typ cache.DeltaType, name, nodeName string) bool {
		t.Helper()
		p := pod(name, nodeName, "1", "1Gi")
		p.Namespace = "ns"
		r, err := slim.transform(p)
		if err != nil {
			t.Fatal(err)
		}
		return s.apply(cache.Delta{Type: typ, Object: r})
	}
	offer(cache.Added, "unbound", "")
	offer(cache.Added, "a", "n")
	offer(cache.Added, "b", "n")
	if over, held, _ := s.overLimit(); over || held != 2 {
		t.Fatalf("over %v, held %d: want 2 records, within the limit", over, held)
	}
	if !offer(cache.Added, "c", "n") || offer(cache.Added, "d", "n") {
		t.Error("the first refusal is not a change of capacity, or a later one is")
	}
	if !offer(cache.Updated, "a", "m") {
		t.Error("a held record is not updated when the records are full")
	}
	if over, held, _ := s.overLimit(); !over || held != 2 {
		t.Fatalf("over %v, held %d: want 2 records, over the limit", over, held)
	}
	if !offer(cache.Deleted, "b", "n") {
		t.Error("a held record was not deleted")
	}
	if over, held, _ := s.overLimit(); !over || held != 1 {
		t.Errorf("over %v, held %d: a refusal is forgotten before a new list", over, held)
	}
	limit = 3
	s.nodesChanged.Store(true)
	offer(cache.Added, "e", "n")
	offer(cache.Added, "f", "n")
	if _, held, l := s.overLimit(); held != 3 || l != 3 {
		t.Errorf("held %d with limit %d after the nodes changed, want 3 of 3", held, l)
	}
}

func TestWithoutRoomOffersNothing(t *testing.T) {
	c := ComputeCapacity([]*corev1.Node{node("a", "4", "8Gi")}, nil)
	w := c.withoutRoom()
	if !w.PodsOverLimit || c.PodsOverLimit {
		t.Error("PodsOverLimit is not set on the copy only")
	}
	if w.Capacity.Cpu().Cmp(resource.MustParse("4")) != 0 || w.NodeCount != 1 || w.EligibleNodes != 1 {
		t.Errorf("the nodes' capacity is lost: %+v", w)
	}
	for name, q := range w.Allocatable {
		if !q.IsZero() {
			t.Errorf("allocatable %s = %s", name, q.String())
		}
	}
	if len(w.Allocatable) != len(c.Allocatable) || len(w.Nodes) != 1 {
		t.Fatalf("resources or nodes lost: %+v", w)
	}
	for name, q := range w.Nodes[0].Free {
		if !q.IsZero() {
			t.Errorf("node a's free %s = %s", name, q.String())
		}
	}
	if c.Nodes[0].Free.Cpu().IsZero() {
		t.Error("the original capacity's nodes were zeroed")
	}
}

// A capacity watch that refused pods is restarted once it is podRecordsRelistInterval old (the
// new one lists the pods again), and what it knew serves until the new one syncs; one within its
// limit is kept.
func TestACapacityWatchOverItsLimitIsListedAgain(t *testing.T) {
	now := time.Now()
	watch := func(over bool) *capacityWatch {
		w := &capacityWatch{cancel: func() {}, synced: true, last: Capacity{NodeCount: 2, PodsOverLimit: over},
			started: now.Add(-podRecordsRelistInterval), pods: newPodRecords(func() int { return 0 })}
		if over {
			w.pods.refused = 1
		}
		return w
	}
	c := &cluster{name: "full", state: Snapshot{Name: "full", Role: RoleSecondary}}
	c.capacity = watch(false)
	if c.takeCapacityDueForRelist(now) != nil || c.capacity == nil {
		t.Fatal("a watch within its limit was restarted")
	}
	c.capacity = watch(true)
	if c.takeCapacityDueForRelist(now.Add(-time.Second)) != nil {
		t.Fatal("a watch over its limit was restarted before podRecordsRelistInterval")
	}
	if cw := c.takeCapacityDueForRelist(now); cw == nil || c.capacity != nil {
		t.Fatal("a watch over its limit was kept past podRecordsRelistInterval")
	}
	if s := c.snapshot(); !s.CapacitySynced || s.Capacity.NodeCount != 2 || !s.Capacity.PodsOverLimit {
		t.Fatalf("what the watch knew does not serve until the new one syncs: %+v", s)
	}
}

func TestRelistAfter(t *testing.T) {
	for _, tc := range []struct {
		name        string
		over        bool
		held, limit int
		want        time.Duration
		ok          bool
	}{
		{"nothing refused: no relist", false, 10, 100, 0, false},
		{"refused, still full", true, 100, 100, podRecordsRelistInterval, true},
		{"refused, at 90 %", true, 90, 100, podRecordsRelistInterval, true},
		{"refused, deletions brought it under 90 %", true, 89, 100, podRecordsRelistSoon, true},
		{"refused, emptied", true, 0, 1110, podRecordsRelistSoon, true},
	} {
		got, ok := relistAfter(tc.over, tc.held, tc.limit)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: relistAfter = %s, %v; want %s, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
