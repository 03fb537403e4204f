package rebalance

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

func virtualNode(cluster string, ready, tainted bool) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: flotillav1.VirtualNodeName(cluster), Labels: map[string]string{flotillav1.LabelCluster: cluster}}}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
	if tainted {
		n.Spec.Taints = []corev1.Taint{{Key: flotillav1.TaintUnreachable, Effect: corev1.TaintEffectNoExecute}}
	}
	return n
}

// backAt is a virtual node whose failover taint was lifted at t (the virtual node manager's stamp).
func backAt(n corev1.Node, t time.Time) corev1.Node {
	n.Annotations = map[string]string{flotillav1.AnnotationBackSince: t.UTC().Format(time.RFC3339)}
	return n
}

func TestReturnsAreDueAfterTheirTimeReady(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	after := 2 * time.Minute
	var r Returns
	never := []corev1.Node{virtualNode("eu", true, false), virtualNode("us", true, false)}
	r.Observe(never)
	if due := r.Due(never, t0.Add(time.Hour), after); len(due) != 0 {
		t.Fatalf("never failed over: due %v", due)
	}
	r.Observe([]corev1.Node{virtualNode("eu", false, true), virtualNode("us", true, false)})
	back := []corev1.Node{backAt(virtualNode("eu", true, false), t0.Add(2*time.Minute)), virtualNode("us", true, false)}
	r.Observe(back)
	if due := r.Due(back, t0.Add(3*time.Minute), after); len(due) != 0 {
		t.Fatalf("back for 1m of 2m: due %v", due)
	}
	if due := r.Due(back, t0.Add(4*time.Minute), after); !due["eu"] || len(due) != 1 {
		t.Fatalf("back for 2m: due %v, want eu", due)
	}
	notReady := []corev1.Node{backAt(virtualNode("eu", false, false), t0.Add(2*time.Minute)), virtualNode("us", true, false)}
	if due := r.Due(notReady, t0.Add(5*time.Minute), after); len(due) != 0 {
		t.Fatalf("back but not Ready: due %v", due)
	}
	cordoned := []corev1.Node{backAt(virtualNode("eu", true, false), t0.Add(2*time.Minute))}
	cordoned[0].Spec.Unschedulable = true
	if due := r.Due(cordoned, t0.Add(5*time.Minute), after); len(due) != 0 {
		t.Fatalf("back but cordoned: due %v", due)
	}

	// A leader that starts now (a restart, a leader change) knows the return from the node alone.
	var successor Returns
	successor.Observe(back)
	if due := successor.Due(back, t0.Add(4*time.Minute), after); !due["eu"] {
		t.Fatalf("a new leader forgot the return: due %v", due)
	}

	// Failed over again before its rebalance: its return counts from the next one.
	tainted := []corev1.Node{backAt(virtualNode("eu", false, true), t0.Add(2*time.Minute))}
	r.Observe(tainted)
	if due := r.Due(tainted, t0.Add(7*time.Minute), after); len(due) != 0 {
		t.Fatalf("tainted again: due %v", due)
	}
	back = []corev1.Node{backAt(virtualNode("eu", true, false), t0.Add(8*time.Minute))}
	r.Observe(back)
	if stamp := r.Done("eu"); stamp != t0.Add(8*time.Minute).Format(time.RFC3339) {
		t.Fatalf("done with stamp %q", stamp)
	}
	r.Observe(back) // the stamp not yet removed from the node
	if due := r.Due(back, t0.Add(time.Hour), after); len(due) != 0 {
		t.Fatalf("done: due %v", due)
	}
}

func TestGroupsLeaveOutControllersWithAPodOnTheMove(t *testing.T) {
	pod := func(name, owner, node string, ready bool, opts ...func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{flotillav1.LabelProxy: "true"},
			OwnerReferences: []metav1.OwnerReference{{UID: types.UID(owner), Controller: ptr.To(true), Kind: "ReplicaSet", Name: owner}}},
			Spec: corev1.PodSpec{NodeName: node}}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		for _, o := range opts {
			o(&p)
		}
		return p
	}
	eu, us := flotillav1.VirtualNodeName("eu"), flotillav1.VirtualNodeName("us")
	deleting := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }
	unowned := func(p *corev1.Pod) { p.OwnerReferences = nil }
	groups, busy := placement.Groups([]corev1.Pod{
		pod("a-1", "a", eu, true), pod("a-2", "a", us, true),
		pod("b-1", "b", eu, true), pod("b-2", "b", "", false), // b's replacement not bound yet
		pod("c-1", "c", us, true), pod("c-2", "c", us, true, deleting),
		pod("d-1", "d", us, false),
		pod("e-1", "e", us, true, unowned),
		pod("f-1", "f", "worker-1", true), // not on a virtual node
	})
	if len(groups) != 1 || len(groups["a"]) != 2 {
		t.Fatalf("groups = %v, want a's two pods only", groups)
	}
	for _, uid := range []types.UID{"b", "c", "d", "f"} {
		if !busy[uid] {
			t.Errorf("%s not busy: %v", uid, busy)
		}
	}
	if busy["e"] {
		t.Error("an unowned pod is nobody's")
	}
}

func TestNextTakesOnlyMovesToADueCluster(t *testing.T) {
	moves := []placement.Move{{From: "us", To: "asia"}, {From: "us", To: "eu"}}
	if m := Next(moves, map[string]bool{"eu": true}); m == nil || m.To != "eu" {
		t.Fatalf("Next = %+v, want the move to eu", m)
	}
	if m := Next(moves, map[string]bool{"ap": true}); m != nil {
		t.Fatalf("Next = %+v, want none", m)
	}
}
