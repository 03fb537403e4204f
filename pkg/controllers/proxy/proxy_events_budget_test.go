package proxy

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A burst of unhealthy delegates in one secondary lists its Events at most eventListBurst times at
// once; a look over the budget is given back, not lost, and another secondary has its own budget.
func TestEventListsIntoASecondaryAreBudgeted(t *testing.T) {
	var f eventForwarding
	allowed := 0
	for range 100 {
		if f.allow("east") {
			allowed++
		}
	}
	if allowed != eventListBurst {
		t.Errorf("%d lists allowed at once, want %d", allowed, eventListBurst)
	}
	if !f.allow("west") {
		t.Error("another secondary's budget is its own")
	}
	proxy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "p1"}}
	delegate := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1"}}
	t0 := time.Now()
	f.next(proxy, delegate, t0)
	if _, look := f.next(proxy, delegate, t0.Add(eventLookAgain)); !look {
		t.Fatal("the first look is due eventLookAgain after the change")
	}
	if wait := f.deferLook(proxy); wait != eventLookAgain {
		t.Errorf("deferred by %s, want %s", wait, eventLookAgain)
	}
	if _, look := f.next(proxy, delegate, t0.Add(2*eventLookAgain)); !look {
		t.Error("the deferred look is still due")
	}
}
