package proxy

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-dev/flotilla/internal/eventwriter"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

const (
	// eventsPerMinute bounds the Events forwarded to one proxy: a crash-looping delegate's
	// BackOff Events must not flood the primary's Event store.
	eventsPerMinute = 10
	// eventLooks is how many times a delegate's Events are listed for one state of it: the
	// scheduler and the kubelet record an Event just after the status change that brought the
	// reconcile, so the first list can come too early.
	eventLooks = 3
	// eventLookAgain is the pause between those lists.
	eventLookAgain = 3 * time.Second
	// eventListsPerSecond (burst eventListBurst) bounds the Event lists into one secondary: a
	// burst of 1000 delegates all Pending a few seconds would otherwise list Events 1000 times
	// and more, a field-selector scan each, on an API server busy starting them (bench: the
	// last delegate of 1000 was created 8 s after the last proxy). A look over the budget is
	// deferred, not lost.
	eventListsPerSecond = 5
	eventListBurst      = 10
)

// eventForwarding remembers, per proxy, what of its delegate's Events was already shown on it.
type eventForwarding struct {
	mu      sync.Mutex
	proxies map[types.UID]*forwarded
	budgets map[string]*rate.Limiter // per secondary
}

// allow takes one Event list from a secondary's budget.
func (f *eventForwarding) allow(cluster string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.budgets == nil {
		f.budgets = map[string]*rate.Limiter{}
	}
	b, ok := f.budgets[cluster]
	if !ok {
		b = rate.NewLimiter(eventListsPerSecond, eventListBurst)
		f.budgets[cluster] = b
	}
	return b.Allow()
}

// deferLook gives back a look the budget did not allow: it is tried again eventLookAgain later.
// Each try is a reconcile: a thousand Pending delegates tried again every second took the
// workers that new proxies needed (bench, 1000 pods).
func (f *eventForwarding) deferLook(proxy *corev1.Pod) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, ok := f.proxies[proxy.UID]; ok && st.looks > 0 {
		st.looks--
	}
	return eventLookAgain
}

type forwarded struct {
	// delegateVersion is the delegate's resourceVersion last seen, since when it was seen, and how
	// many times its Events were listed for it.
	delegateVersion string
	since           time.Time
	looks           int
	// counts are the Events shown, by their UID, with the count shown (an Event repeated in the
	// secondary comes again when its count grew).
	counts map[types.UID]int32
	// window and sent rate-limit.
	window time.Time
	sent   int
}

// forget drops what is remembered of a proxy (it is gone).
func (f *eventForwarding) forget(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.proxies, uid)
}

// next says what to do for this state of the delegate: wait (the returned time) before a look,
// look now, or nothing (0, false). The first look waits eventLookAgain after the state appeared:
// a pod that starts at once costs no read at all.
func (f *eventForwarding) next(proxy, delegate *corev1.Pod, now time.Time) (wait time.Duration, look bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.proxies == nil {
		f.proxies = map[types.UID]*forwarded{}
	}
	st, ok := f.proxies[proxy.UID]
	if !ok {
		st = &forwarded{counts: map[types.UID]int32{}}
		f.proxies[proxy.UID] = st
	}
	if st.delegateVersion != delegate.ResourceVersion {
		st.delegateVersion, st.since, st.looks = delegate.ResourceVersion, now, 0
	}
	if wait, more := st.untilLook(now); !more || wait > 0 {
		return wait, false
	}
	st.looks++
	return 0, true
}

// untilLook is how long until the next look for the delegate's state (0: now), and whether one
// is left.
func (st *forwarded) untilLook(now time.Time) (time.Duration, bool) {
	if st.looks >= eventLooks {
		return 0, false
	}
	return max(0, st.since.Add(time.Duration(st.looks+1)*eventLookAgain).Sub(now)), true
}

// wait is how long until the proxy's next look (0: none left for this state).
func (f *eventForwarding) wait(proxy *corev1.Pod, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.proxies[proxy.UID]
	if !ok {
		return 0
	}
	wait, more := st.untilLook(now)
	if !more {
		return 0
	}
	return max(wait, time.Millisecond)
}

// fresh returns the Events not shown yet (or repeated since), within the proxy's rate limit, and
// records them as shown.
func (f *eventForwarding) fresh(proxy *corev1.Pod, evs []corev1.Event, now time.Time) []corev1.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.proxies[proxy.UID]
	if st == nil {
		return nil
	}
	if now.Sub(st.window) >= time.Minute {
		st.window, st.sent = now, 0
	}
	var out []corev1.Event
	for _, e := range evs {
		count := max(e.Count, 1)
		if e.Series != nil {
			count = max(count, e.Series.Count)
		}
		if st.counts[e.UID] >= count {
			continue
		}
		if st.sent >= eventsPerMinute {
			break
		}
		st.counts[e.UID] = count
		st.sent++
		out = append(out, e)
	}
	return out
}

// healthy says whether a delegate has nothing to tell: running with every container ready, or
// done.
func healthy(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return true
	case corev1.PodRunning:
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status == corev1.ConditionTrue
			}
		}
	}
	return false
}

// forwardEvents shows the delegate's Events in its secondary on the proxy (kubectl describe,
// kubectl events), each with the cluster's name, while the delegate is not healthy: why it does
// not schedule, pull, start or stay up. It reads the secondary only for a delegate still unhealthy
// eventLookAgain after it changed, and at most eventLooks times per change, with one list by the
// delegate's UID. It returns when to look again (0: not for this state).
func (r *Reconciler) forwardEvents(ctx context.Context, sec clusters.Secondary, proxy, delegate *corev1.Pod) time.Duration {
	if r.Recorder == nil || healthy(delegate) {
		return 0
	}
	wait, look := r.events.next(proxy, delegate, r.now())
	if !look {
		return wait
	}
	if !r.events.allow(sec.Name) {
		return r.events.deferLook(proxy)
	}
	if evs, err := sec.EventsOf(ctx, delegate.Namespace, delegate.UID); err == nil {
		for _, e := range r.events.fresh(proxy, evs, r.now()) {
			eventwriter.Forward(r.Recorder, proxy, sec.Name, "Delegate", &e)
		}
	}
	// Events are best effort: a failed list is tried again at the next look.
	return r.events.wait(proxy, r.now())
}
