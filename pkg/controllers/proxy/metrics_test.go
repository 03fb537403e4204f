package proxy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// histogram is the sample count and sum of one series of a histogram vector.
func histogram(t *testing.T, vec *prometheus.HistogramVec, labels ...string) (count uint64, sum float64) {
	t.Helper()
	var m dto.Metric
	if err := vec.WithLabelValues(labels...).(prometheus.Histogram).Write(&m); err != nil {
		t.Fatalf("reading %v: %v", labels, err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

func proxyOn(cluster, name string, uid types.UID, created time.Time) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid, CreationTimestamp: metav1.NewTime(created),
		Labels: map[string]string{flotillav1.LabelProxy: "true"}},
		Spec: corev1.PodSpec{NodeName: flotillav1.VirtualNodeName(cluster)}}
}

func TestStartsObservesEachLegOncePerProxy(t *testing.T) {
	const cluster = "legs-once"
	admitted := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := proxyOn(cluster, "web", "uid-1", admitted)
	var s starts
	s.delegateCreated(p, cluster, admitted.Add(2*time.Second))
	s.delegateRunning(p, cluster, admitted.Add(5*time.Second))
	s.delegateRunning(p, cluster, admitted.Add(9*time.Second)) // seen again: not a new start
	s.proxyRunning(p, cluster, admitted.Add(6*time.Second))
	s.proxyRunning(p, cluster, admitted.Add(8*time.Second)) // a stale cache showed it Pending: not twice

	for _, tc := range []struct {
		name      string
		vec       *prometheus.HistogramVec
		labels    []string
		wantCount uint64
		wantSum   float64
	}{
		{"total", podStart, []string{cluster}, 1, 6},
		{LegAdmissionToDelegateCreated, podStartLegs, []string{cluster, LegAdmissionToDelegateCreated}, 1, 2},
		{LegDelegateCreatedToRunning, podStartLegs, []string{cluster, LegDelegateCreatedToRunning}, 1, 3},
		{LegDelegateRunningToProxyRunning, podStartLegs, []string{cluster, LegDelegateRunningToProxyRunning}, 1, 1},
	} {
		if count, sum := histogram(t, tc.vec, tc.labels...); count != tc.wantCount || sum != tc.wantSum {
			t.Errorf("%s: count %d sum %v, want %d and %v", tc.name, count, sum, tc.wantCount, tc.wantSum)
		}
	}

	// Another pod of the same name (a StatefulSet's) starts anew.
	s.proxyRunning(proxyOn(cluster, "web", "uid-2", admitted), cluster, admitted.Add(10*time.Second))
	if count, sum := histogram(t, podStart, cluster); count != 2 || sum != 16 {
		t.Errorf("after a new incarnation: count %d sum %v, want 2 and 16", count, sum)
	}
}

func TestStartsAfterARestartObservesOnlyWhatItSaw(t *testing.T) {
	const cluster = "legs-restart"
	admitted := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := proxyOn(cluster, "web", "uid-1", admitted)
	var s starts
	// The delegate was created by the process before this one.
	s.delegateRunning(p, cluster, admitted.Add(30*time.Second))
	s.proxyRunning(p, cluster, admitted.Add(31*time.Second))
	if count, _ := histogram(t, podStartLegs, cluster, LegAdmissionToDelegateCreated); count != 0 {
		t.Errorf("admission_to_delegate_created observed %d times, want 0", count)
	}
	if count, _ := histogram(t, podStartLegs, cluster, LegDelegateCreatedToRunning); count != 0 {
		t.Errorf("delegate_created_to_running observed %d times, want 0", count)
	}
	if count, sum := histogram(t, podStart, cluster); count != 1 || sum != 31 {
		t.Errorf("total: count %d sum %v, want 1 and 31", count, sum)
	}
	s.forget(types.NamespacedName{Namespace: "ns", Name: "web"})
	if len(s.m) != 0 {
		t.Errorf("forget kept %v", s.m)
	}
}

func TestPatchStatusObservesTheStartOnceWhenRunningIsWritten(t *testing.T) {
	const cluster = "patch-once"
	admitted := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(admitted.Add(4 * time.Second))
	base := proxyOn(cluster, "web", "uid-1", admitted)
	base.Status.Phase = corev1.PodPending
	r := &Reconciler{Client: fake.NewClientBuilder().WithObjects(base.DeepCopy()).WithStatusSubresource(&corev1.Pod{}).Build(), Clock: clk}
	for i := range 2 {
		running := base.DeepCopy()
		running.Status.Phase = corev1.PodRunning
		if err := r.patchStatus(t.Context(), base, running); err != nil {
			t.Fatalf("patch %d: %v", i, err)
		}
	}
	if count, sum := histogram(t, podStart, cluster); count != 1 || sum != 4 {
		t.Errorf("count %d sum %v, want 1 and 4", count, sum)
	}
	// A write that is not the one to Running observes nothing.
	pending := base.DeepCopy()
	pending.Status.Reason = flotillav1.ReasonWaitingForDependencies
	other := proxyOn(cluster, "db", "uid-3", admitted)
	if err := r.patchStatus(t.Context(), other, pending); err != nil {
		t.Fatal(err)
	}
	if count, _ := histogram(t, podStart, cluster); count != 1 {
		t.Errorf("count %d after a Pending write, want 1", count)
	}
}

func TestCounts(t *testing.T) {
	now := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	pod := func(cluster string, phase corev1.PodPhase, age time.Duration, delegated, terminating bool) corev1.Pod {
		p := proxyOn(cluster, "p", "u", now.Add(-age))
		if cluster == "" {
			p.Spec.NodeName = ""
		}
		p.Status.Phase = phase
		if delegated {
			p.Status.Conditions = []corev1.PodCondition{{Type: flotillav1.PodConditionDelegated, Status: corev1.ConditionTrue}}
		}
		if terminating {
			p.DeletionTimestamp = &metav1.Time{Time: now}
		}
		return *p
	}
	counts, oldest := Counts([]corev1.Pod{
		pod("east", corev1.PodRunning, time.Hour, true, false),
		pod("east", corev1.PodPending, 3*time.Minute, false, false), // waits for its delegate
		pod("east", corev1.PodPending, 9*time.Minute, true, false),  // has one, its image pulls
		pod("east", corev1.PodFailed, time.Hour, false, false),      // NotAdmitted: terminal
		pod("east", corev1.PodPending, 20*time.Minute, false, true), // terminating
		pod("west", corev1.PodRunning, time.Hour, true, false),
		pod("", "", 7*time.Minute, false, false), // waits for room, bound to no cluster
	}, now)
	want := map[string]map[corev1.PodPhase]int{
		"east": {corev1.PodRunning: 1, corev1.PodPending: 3, corev1.PodFailed: 1},
		"west": {corev1.PodRunning: 1},
		"":     {corev1.PodPending: 1},
	}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("counts %v, want %v", counts, want)
	}
	wantOldest := map[string]time.Duration{"east": 3 * time.Minute, "west": 0, "": 7 * time.Minute}
	if fmt.Sprint(oldest) != fmt.Sprint(wantOldest) {
		t.Errorf("oldest %v, want %v", oldest, wantOldest)
	}
}

func TestMetricsCollectsFromTheCacheAtScrape(t *testing.T) {
	now := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	waiting := proxyOn("east", "a", "ua", now.Add(-2*time.Minute))
	waiting.Status.Phase = corev1.PodPending
	reader := fake.NewClientBuilder().WithObjects(waiting).Build()
	m := &Metrics{Reader: reader, Clock: clocktesting.NewFakePassiveClock(now), ctx: t.Context()}
	want := `
# HELP flotilla_proxies_without_delegate_oldest_seconds Age of the oldest proxy that is neither terminal nor terminating and has no delegate yet (its Delegated condition not True), per secondary ("" while bound to none); 0 when every proxy there has one.
# TYPE flotilla_proxies_without_delegate_oldest_seconds gauge
flotilla_proxies_without_delegate_oldest_seconds{member_cluster="east"} 120
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), "flotilla_proxies_without_delegate_oldest_seconds"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m, "flotilla_proxies"); n != len(phases) {
		t.Errorf("%d flotilla_proxies series, want one per phase (%d)", n, len(phases))
	}
	// Deleted from the cache: gone from the next scrape, with nothing to forget.
	if err := reader.Delete(t.Context(), waiting); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m); n != 0 {
		t.Errorf("%d series after the proxy's deletion, want 0", n)
	}
}

func TestCreationErrorReason(t *testing.T) {
	gr := corev1.Resource("pods")
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"forbidden":             {apierrors.NewForbidden(gr, "web", errors.New("quota")), "Forbidden"},
		"invalid":               {apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Pod").GroupKind(), "web", nil), "Invalid"},
		"a webhook timed out":   {apierrors.NewTimeoutError("admission webhook", 1), "Timeout"},
		"deadline":              {fmt.Errorf("creating: %w", context.DeadlineExceeded), "Timeout"},
		"connection refused":    {errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), "Unknown"},
		"a reason of no server": {&apierrors.StatusError{ErrStatus: metav1.Status{Reason: "SomethingNew"}}, "Unknown"},
	} {
		if got := creationErrorReason(tc.err); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}
