package proxy

import (
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestRemainingGrace(t *testing.T) {
	now := time.Unix(1000, 0)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	thirty := int64(30)
	tests := map[string]struct {
		pod  corev1.Pod
		want int64
	}{
		"not deleted":              {pod: corev1.Pod{}, want: corev1.DefaultTerminationGracePeriodSeconds},
		"deleted just now":         {pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: at(30 * time.Second), DeletionGracePeriodSeconds: &thirty}}, want: 30},
		"deadline passed long ago": {pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: at(-2 * time.Minute), DeletionGracePeriodSeconds: &thirty}}, want: 0},
	}
	for name, tc := range tests {
		if got := remainingGrace(&tc.pod, now); got != tc.want {
			t.Errorf("%s: %d, want %d", name, got, tc.want)
		}
	}
}

func TestPendingRetryComesBackWhenTheGracePeriodEnds(t *testing.T) {
	now := time.Unix(1000, 0)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	tests := map[string]struct {
		created, deleted *metav1.Time
		want             time.Duration
	}{
		"young proxy: the floor":                        {created: at(-100 * time.Millisecond), want: pendingRetryFloor},
		"a minute old: a quarter of its age":            {created: at(-time.Minute), want: 15 * time.Second},
		"an hour old: the ceiling":                      {created: at(-time.Hour), want: pendingRetryCeiling},
		"terminating, 4 s of grace left: then":          {created: at(-time.Minute), deleted: at(4 * time.Second), want: 4 * time.Second},
		"terminating, grace past: the floor":            {created: at(-time.Minute), deleted: at(-time.Second), want: pendingRetryFloor},
		"terminating, grace longer than the backoff":    {created: at(-time.Minute), deleted: at(time.Minute), want: 15 * time.Second},
		"young and terminating: the earlier of the two": {created: at(-time.Second), deleted: at(10 * time.Second), want: pendingRetryFloor},
	}
	for name, tc := range tests {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: *tc.created, DeletionTimestamp: tc.deleted}}
		if got := pendingRetry(pod, now); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
}

func TestReleaseReasonKeepsAtMostOncePodsUntilProofOrFence(t *testing.T) {
	now := time.Unix(1000, 0)
	past := metav1.NewTime(now.Add(-time.Minute))
	future := metav1.NewTime(now.Add(time.Minute))
	proxy := func(deadline metav1.Time, controller string, annotations map[string]string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", DeletionTimestamp: &deadline, Annotations: annotations}}
		if controller != "" {
			yes := true
			p.OwnerReferences = []metav1.OwnerReference{{Kind: controller, Name: "owner", Controller: &yes}}
		}
		return p
	}
	node := func(taints ...string) *corev1.Node {
		n := &corev1.Node{}
		for _, k := range taints {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoExecute})
		}
		return n
	}
	atMostOnce := map[string]string{flotillav1.AnnotationAtMostOnce: ""}
	recreate := map[string]string{flotillav1.AnnotationOnVolumeClusterLoss: flotillav1.OnVolumeClusterLossRecreate}
	tests := map[string]struct {
		proxy *corev1.Pod
		node  *corev1.Node
		want  string
	}{
		"reachable cluster: wait for the delegate":                       {proxy(past, "ReplicaSet", nil), node(), ""},
		"virtual node gone: cluster removed":                             {proxy(future, "StatefulSet", nil), nil, flotillav1.ReasonClusterRemoved},
		"fenced: even a StatefulSet pod goes":                            {proxy(future, "StatefulSet", nil), node(corev1.TaintNodeOutOfService), flotillav1.ReasonClusterFenced},
		"unreachable, grace over, ReplicaSet pod":                        {proxy(past, "ReplicaSet", nil), node(flotillav1.TaintUnreachable), flotillav1.ReasonClusterUnreachable},
		"unreachable, grace over, Job pod":                               {proxy(past, "Job", nil), node(flotillav1.TaintUnreachable), flotillav1.ReasonClusterUnreachable},
		"unreachable, grace not over":                                    {proxy(future, "ReplicaSet", nil), node(flotillav1.TaintUnreachable), ""},
		"unreachable, StatefulSet pod waits":                             {proxy(past, "StatefulSet", nil), node(flotillav1.TaintUnreachable), ""},
		"unreachable, annotated at-most-once waits":                      {proxy(past, "ReplicaSet", atMostOnce), node(flotillav1.TaintUnreachable), ""},
		"not ready only (manager down): nothing is released":             {proxy(past, "ReplicaSet", nil), node(corev1.TaintNodeUnreachable), ""},
		"unreachable, grace over, StatefulSet pod that recreates":        {proxy(past, "StatefulSet", recreate), node(flotillav1.TaintUnreachable), flotillav1.ReasonClusterUnreachable},
		"unreachable, grace not over, StatefulSet pod that recreates":    {proxy(future, "StatefulSet", recreate), node(flotillav1.TaintUnreachable), ""},
		"reachable, StatefulSet pod that recreates: waits for the proof": {proxy(past, "StatefulSet", recreate), node(), ""},
	}
	for name, tc := range tests {
		if got := releaseReason(tc.proxy, tc.node, now); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}

func TestStillPendingSkipsOnlyProgressWithinPending(t *testing.T) {
	delegated := corev1.PodCondition{Type: flotillav1.PodConditionDelegated, Status: corev1.ConditionTrue}
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/2 nodes"}
	status := func(phase corev1.PodPhase, conds ...corev1.PodCondition) corev1.PodStatus {
		return corev1.PodStatus{Phase: phase, Conditions: conds}
	}
	notReady := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [c]"}
	waiting := func(reason string) corev1.PodStatus {
		s := status(corev1.PodPending, delegated, scheduled, notReady)
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}}
		return s
	}
	starting, pulling := waiting("ContainerCreating"), waiting("ErrImagePull")
	tests := map[string]struct {
		current, want corev1.PodStatus
		skip          bool
	}{
		"scheduled in the secondary: no write":          {status(corev1.PodPending, delegated), status(corev1.PodPending, delegated, scheduled), true},
		"first write carries Delegated":                 {status(corev1.PodPending), status(corev1.PodPending, delegated), false},
		"unschedulable there: written":                  {status(corev1.PodPending, delegated), status(corev1.PodPending, delegated, unschedulable), false},
		"unschedulable already shown: no new write":     {status(corev1.PodPending, delegated, unschedulable), status(corev1.PodPending, delegated, unschedulable), true},
		"running: written":                              {status(corev1.PodPending, delegated), status(corev1.PodRunning, delegated, scheduled), false},
		"containers starting: no write":                 {status(corev1.PodPending, delegated), starting, true},
		"an image that does not pull: written":          {status(corev1.PodPending, delegated), pulling, false},
		"the same image error again: no new write":      {pulling, pulling, true},
		"the image error over, still starting: written": {pulling, starting, false},
	}
	for name, tc := range tests {
		if got := stillPending(tc.current, tc.want); got != tc.skip {
			t.Errorf("%s: %v, want %v", name, got, tc.skip)
		}
	}
}

func TestAtMostOnceDelegatesAreNeverForceDeleted(t *testing.T) {
	now := time.Unix(1000, 0)
	over := metav1.NewTime(now.Add(-time.Minute))
	left := metav1.NewTime(now.Add(20 * time.Second))
	yes := true
	pod := func(deadline metav1.Time, owner string, annotations map[string]string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", DeletionTimestamp: &deadline, Annotations: annotations}}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: owner, Name: "o", Controller: &yes}}
		}
		return p
	}
	tests := map[string]struct {
		proxy      *corev1.Pod
		grace      int64
		forceAgain bool
	}{
		"ReplicaSet pod, grace over":         {pod(over, "ReplicaSet", nil), 0, true},
		"ReplicaSet pod, grace left":         {pod(left, "ReplicaSet", nil), 20, false},
		"StatefulSet pod, grace over":        {pod(over, "StatefulSet", nil), 1, false},
		"annotated at-most-once, grace over": {pod(over, "", map[string]string{flotillav1.AnnotationAtMostOnce: ""}), 1, false},
		"StatefulSet pod, grace left":        {pod(left, "StatefulSet", nil), 20, false},
	}
	for name, tc := range tests {
		if got := delegateGrace(tc.proxy, now); got != tc.grace {
			t.Errorf("%s: grace %d, want %d", name, got, tc.grace)
		}
		if got := forceAgain(tc.proxy, now); got != tc.forceAgain {
			t.Errorf("%s: force again %v, want %v", name, got, tc.forceAgain)
		}
	}
	if g := sweepGrace(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{flotillav1.AnnotationAtMostOnce: ""}}}); g != nil {
		t.Errorf("an at-most-once delegate is swept with grace %d, want its own", *g)
	}
	if g := sweepGrace(&corev1.Pod{}); g == nil || *g != 0 {
		t.Errorf("an at-least-once delegate is swept with grace %v, want 0", g)
	}
}

func TestBudgetBoundsTheWorkOnOneSecondary(t *testing.T) {
	r := &Reconciler{PerCluster: 2}
	a, ok1 := r.budget("slow")
	_, ok2 := r.budget("slow")
	_, ok3 := r.budget("slow")
	if !ok1 || !ok2 || ok3 {
		t.Fatalf("slots taken: %v %v %v, want two of two", ok1, ok2, ok3)
	}
	if _, ok := r.budget("other"); !ok {
		t.Fatal("another secondary has its own budget")
	}
	a()
	if _, ok := r.budget("slow"); !ok {
		t.Fatal("a released slot is free again")
	}
}

func TestAllowanceRefused(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for err, want := range map[error]bool{
		apierrors.NewForbidden(gr, "p", errors.New("exceeded quota: "+flotillav1.AllowanceQuotaName+", requested: pods=1, used: pods=3, limited: pods=3")):                                                             true,
		apierrors.NewForbidden(gr, "p", errors.New("this cluster lends Flotilla (primary x) part of itself (PrimaryAllowance x): its lender has not yet put the quota of namespace n in force; pods refused for now")): true,
		apierrors.NewForbidden(gr, "p", errors.New("exceeded quota: team-quota, requested: pods=1")):                                                                                                                   false,
		apierrors.NewInternalError(errors.New("exceeded quota: " + flotillav1.AllowanceQuotaName)):                                                                                                                     false,
	} {
		if got := allowanceRefused(err); got != want {
			t.Errorf("allowanceRefused(%v) = %v, want %v", err, got, want)
		}
	}
}
