package proxy

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestEventForwardingLooksLateAndBoundedPerDelegateState(t *testing.T) {
	var f eventForwarding
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	proxy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "p"}}
	delegate := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "d", ResourceVersion: "1"}}
	if wait, look := f.next(proxy, delegate, now); look || wait != eventLookAgain {
		t.Fatalf("a new state: look %t, wait %s; want a wait of %s first", look, wait, eventLookAgain)
	}
	looks := 0
	for i := 1; i <= 20; i++ {
		if _, look := f.next(proxy, delegate, now.Add(time.Duration(i)*time.Second)); look {
			looks++
		}
	}
	if looks != eventLooks {
		t.Errorf("%d looks for one state over 20 s, want %d", looks, eventLooks)
	}
	delegate.ResourceVersion = "2"
	if _, look := f.next(proxy, delegate, now.Add(21*time.Second)); look {
		t.Error("a changed delegate is looked at without the wait")
	}
	if _, look := f.next(proxy, delegate, now.Add(24*time.Second)); !look {
		t.Error("a changed delegate still unhealthy after the wait is not looked at")
	}
}

func TestEventForwardingShowsEachEventOnceUnlessRepeatedAndRateLimits(t *testing.T) {
	var f eventForwarding
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	proxy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "p"}}
	f.next(proxy, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1"}}, now)
	ev := func(uid string, count int32) corev1.Event {
		return corev1.Event{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}, Count: count, Reason: "FailedScheduling"}
	}
	if got := f.fresh(proxy, []corev1.Event{ev("a", 1)}, now); len(got) != 1 {
		t.Fatalf("first sight: %d shown", len(got))
	}
	if got := f.fresh(proxy, []corev1.Event{ev("a", 1)}, now); len(got) != 0 {
		t.Errorf("the same Event shown again")
	}
	if got := f.fresh(proxy, []corev1.Event{ev("a", 4)}, now); len(got) != 1 {
		t.Errorf("a repeated Event (count 4) not shown again")
	}
	var many []corev1.Event
	for i := range 30 {
		many = append(many, ev(fmt.Sprintf("m%d", i), 1))
	}
	if got := f.fresh(proxy, many, now); len(got) != eventsPerMinute-2 {
		t.Errorf("%d shown within the minute, want %d (the limit less the 2 already shown)", len(got), eventsPerMinute-2)
	}
	if got := f.fresh(proxy, many, now.Add(time.Minute)); len(got) != eventsPerMinute {
		t.Errorf("%d shown the next minute, want %d", len(got), eventsPerMinute)
	}
	f.forget(proxy.UID)
	if got := f.fresh(proxy, many, now); got != nil {
		t.Errorf("a forgotten proxy still forwards")
	}
}
