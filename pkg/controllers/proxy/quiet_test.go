package proxy

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestQuietStartFoldsTheFirstWriteOnlyWhileTheDelegateSimplyStarts(t *testing.T) {
	now := time.Unix(1000, 0)
	fresh := corev1.PodStatus{Phase: corev1.PodPending}
	waitedBefore := corev1.PodStatus{Phase: corev1.PodPending, Reason: flotillav1.ReasonWaitingForDependencies, Message: "Waiting for Secret db"}
	starting := corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}
	unschedulable := corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes"}}}
	pulling := corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{
		{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}}}}
	running := corev1.PodStatus{Phase: corev1.PodRunning}
	tests := map[string]struct {
		current, want corev1.PodStatus
		created       time.Time
		fold          bool
	}{
		"created here a moment ago, simply starting: folded":     {fresh, starting, now.Add(-time.Second), true},
		"created here, the window over: written":                 {fresh, starting, now.Add(-DefaultQuietStart), false},
		"created by another process (failover): written":         {fresh, starting, time.Time{}, false},
		"the proxy says what it waited for: cleared at once":     {waitedBefore, starting, now.Add(-time.Second), false},
		"unschedulable in the secondary: written at once":        {fresh, unschedulable, now.Add(-time.Second), false},
		"an image that does not pull: written at once":           {fresh, pulling, now.Add(-time.Second), false},
		"running: written (the one write, with Delegated in it)": {fresh, running, now.Add(-time.Second), false},
	}
	for name, tc := range tests {
		if got := quietStart(tc.current, tc.want, tc.created, now, DefaultQuietStart); got != tc.fold {
			t.Errorf("%s: %v, want %v", name, got, tc.fold)
		}
		// --quiet-start=0: nothing waits, whatever the delegate shows.
		if quietStart(tc.current, tc.want, tc.created, now, 0) {
			t.Errorf("%s, without a quiet start: folded", name)
		}
		// A shorter window (--quiet-start=500ms) is over a second after the creation.
		if tc.created.Equal(now.Add(-time.Second)) && quietStart(tc.current, tc.want, tc.created, now, 500*time.Millisecond) {
			t.Errorf("%s, a quiet start of 500ms: folded after 1s", name)
		}
	}
}

func TestQuietChangeWakesTheProxyOnlyForWhatItShowsOrDoes(t *testing.T) {
	base := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "d1", ResourceVersion: "1", Annotations: map[string]string{flotillav1.AnnotationProxyUID: "p1"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "app:1", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending}}
	}
	change := func(f func(p *corev1.Pod)) *corev1.Pod {
		p := base()
		p.ResourceVersion = "2"
		f(p)
		return p
	}
	deleting := metav1.NewTime(time.Unix(1000, 0))
	tests := map[string]struct {
		obj   *corev1.Pod
		quiet bool
	}{
		"bound to a node there": {change(func(p *corev1.Pod) { p.Spec.NodeName = "n1" }), true},
		"scheduled, an IP, containers creating": {change(func(p *corev1.Pod) {
			p.Status.PodIP = "10.0.0.9"
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
		}), true},
		"running":     {change(func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }), false},
		"failed":      {change(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), false},
		"terminating": {change(func(p *corev1.Pod) { p.DeletionTimestamp = &deleting }), false},
		"unschedulable there": {change(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		}), false},
		"an image that does not pull": {change(func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}}}
		}), false},
		"an init container restarted": {change(func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", RestartCount: 1}}
		}), false},
		"its image changed there":     {change(func(p *corev1.Pod) { p.Spec.Containers[0].Image = "app:2" }), false},
		"its resources changed there": {change(func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests = nil }), false},
		"an ephemeral container": {change(func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug"}}}
		}), false},
		"another proxy's now":      {change(func(p *corev1.Pod) { p.Annotations[flotillav1.AnnotationProxyUID] = "p2" }), false},
		"another pod of that name": {change(func(p *corev1.Pod) { p.UID = "d2" }), false},
	}
	for name, tc := range tests {
		if got := quietChange(base(), tc.obj); got != tc.quiet {
			t.Errorf("%s: quiet %v, want %v", name, got, tc.quiet)
		}
	}
}

func TestDelegateNewsSkipsOnlyTheEchoOfItsOwnCreation(t *testing.T) {
	r := &Reconciler{QuietStart: DefaultQuietStart}
	proxy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "p1"}}
	delegate := func(proxyUID string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "d1",
			Annotations: map[string]string{flotillav1.AnnotationProxyUID: proxyUID}}, Status: corev1.PodStatus{Phase: phase}}
	}
	if !r.delegateNews(nil, delegate("p1", corev1.PodPending)) {
		t.Error("a delegate this process did not create (a failover, a relist) is news")
	}
	r.starts.delegateCreated(proxy, "east", time.Now())
	if r.delegateNews(nil, delegate("p1", corev1.PodPending)) {
		t.Error("the addition of the delegate this process has just created, Pending, is no news")
	}
	r.QuietStart = 0
	if !r.delegateNews(nil, delegate("p1", corev1.PodPending)) {
		t.Error("without a quiet start (--quiet-start=0), the addition of the delegate just created is news: it writes Pending")
	}
	r.QuietStart = DefaultQuietStart
	if !r.delegateNews(nil, delegate("p1", corev1.PodRunning)) {
		t.Error("a delegate added Running is news")
	}
	if !r.delegateNews(nil, delegate("p0", corev1.PodPending)) {
		t.Error("the delegate of an earlier proxy of that name is news")
	}
	if !r.delegateNews(delegate("p1", corev1.PodPending), delegate("p1", corev1.PodRunning)) {
		t.Error("a delegate Running is news")
	}
	relabelled := delegate("p1", corev1.PodRunning)
	relabelled.Labels = map[string]string{"tier": "web"}
	if r.delegateNews(delegate("p1", corev1.PodRunning), relabelled) {
		t.Error("a change of a Running delegate that leaves what is read of it is no news")
	}
	ready := delegate("p1", corev1.PodRunning)
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if !r.delegateNews(delegate("p1", corev1.PodRunning), ready) {
		t.Error("a Running delegate turning Ready is news")
	}
	terminating := func(phase corev1.PodPhase) *corev1.Pod {
		d := delegate("p1", phase)
		d.DeletionTimestamp = &metav1.Time{Time: time.Unix(1000, 0)}
		return d
	}
	if !r.delegateNews(delegate("p1", corev1.PodRunning), terminating(corev1.PodRunning)) {
		t.Error("a delegate's deletion starting is news (its proxy may not be terminating: it was deleted in the secondary)")
	}
	if r.delegateNews(terminating(corev1.PodRunning), terminating(corev1.PodSucceeded)) {
		t.Error("a change within a delegate's termination is no news: its deletion is")
	}
	gone := metav1.NewTime(time.Unix(1000, 0))
	terminatingProxy := proxy.DeepCopy()
	terminatingProxy.DeletionTimestamp, terminatingProxy.Finalizers = &gone, []string{flotillav1.FinalizerDelegate}
	r.cache = fake.NewClientBuilder().WithObjects(terminatingProxy).Build()
	_ = r.keepRunning(t.Context(), nil)
	if r.delegateNews(delegate("p1", corev1.PodRunning), terminating(corev1.PodRunning)) {
		t.Error("a delegate's deletion starting is no news when its proxy is terminating: the proxy's deletion made it")
	}
	other := terminating(corev1.PodRunning)
	other.Annotations[flotillav1.AnnotationProxyUID] = "p0"
	if !r.delegateNews(delegate("p0", corev1.PodRunning), other) {
		t.Error("the deletion of another proxy's delegate of that name is news")
	}
	r.starts.delegateRunning(proxy, "east", time.Now())
	if r.starts.starting(types.NamespacedName{Namespace: "ns", Name: "web"}, "p1") {
		t.Error("a delegate seen Running has ended its start")
	}
	if !r.delegateNews(nil, delegate("p1", corev1.PodPending)) {
		t.Error("once its start is over, an addition (a relist) is news again")
	}
}

func TestDeleteRecheckComesWithTheGracePeriodsEndWithinBounds(t *testing.T) {
	now := time.Unix(1000, 0)
	at := func(d time.Duration) *corev1.Pod {
		ts := metav1.NewTime(now.Add(d))
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &ts}}
	}
	tests := map[string]struct {
		proxy *corev1.Pod
		want  time.Duration
	}{
		"grace over: soon":          {at(-time.Second), transientRetry},
		"ten seconds of grace left": {at(10 * time.Second), 10 * time.Second},
		"a long grace: bounded":     {at(time.Hour), deleteRecheckCeiling},
	}
	for name, tc := range tests {
		if got := deleteRecheck(tc.proxy, now); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
}
