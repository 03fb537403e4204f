package webhook

import (
	"context"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/internal/clocks"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

// ProxyBook keeps, per controller, the few facts Spread counts of each of its proxies in the
// manager's cache: fed by the proxy informer's events (AddEventHandler), read with no copy of a
// pod. Listing the controller's proxies from the cache at each admission copied every one of them
// (about 1 KiB each, under the lock all admissions of a controller take): a 1000-pod burst
// allocated half a gigabyte and its admissions waited in line (bench: 232 ms per call in the
// handler). Visiting each of them at each admission still made a burst's admissions cost the
// square of its size (bench: 404 ms per call in the handler at 10,000 pods of one ReplicaSet):
// the book now keeps the counts themselves, up to date at each event.
type ProxyBook struct {
	mu           sync.RWMutex
	byController map[types.UID]*controllerProxies
}

// proxyFacts is what Spread reads of one proxy.
type proxyFacts struct {
	cluster    string // "" while not bound to a virtual node
	created    time.Time
	admittedBy string
	deleting   bool
}

// counted says whether the proxy counts as its controller's in its cluster: bound there and not
// on its way out.
func (f proxyFacts) counted() bool { return f.cluster != "" && !f.deleting }

// controllerProxies are one controller's proxies in the book, and their running tallies.
type controllerProxies struct {
	facts map[types.NamespacedName]proxyFacts
	// live is the number of counted proxies in each cluster.
	live map[string]int
	// byCreation is the same proxies by the second of their creation, cluster and admitting
	// replica: Spread matches its own recent admissions against those created since they began.
	// Seconds older than bookSeconds before the newest are dropped (a window is seconds long).
	byCreation map[int64]map[boundBy]int
	newest     int64
}

// boundBy is a cluster and the replica whose webhook bound a proxy there.
type boundBy struct{ cluster, by string }

// bookSeconds is how many seconds of creations the book keeps, before the newest it saw.
const bookSeconds = 300

// tally adds (sign 1) or takes away (sign -1) one proxy's facts from the tallies.
func (c *controllerProxies) tally(f proxyFacts, sign int) {
	if !f.counted() {
		return
	}
	c.live[f.cluster] += sign
	if c.live[f.cluster] <= 0 {
		delete(c.live, f.cluster)
	}
	sec := f.created.Unix()
	bucket := c.byCreation[sec]
	if bucket == nil {
		if sign < 0 || sec < c.newest-bookSeconds {
			return // a second already dropped
		}
		bucket = map[boundBy]int{}
		c.byCreation[sec] = bucket
	}
	k := boundBy{cluster: f.cluster, by: f.admittedBy}
	bucket[k] += sign
	if bucket[k] <= 0 {
		delete(bucket, k)
	}
	if len(bucket) == 0 {
		delete(c.byCreation, sec)
	}
	if sec > c.newest {
		c.newest = sec
		for s := range c.byCreation {
			if s < sec-bookSeconds {
				delete(c.byCreation, s)
			}
		}
	}
}

var _ toolscache.ResourceEventHandler = (*ProxyBook)(nil)

// OnAdd records a proxy.
func (b *ProxyBook) OnAdd(obj any, _ bool) { b.record(obj) }

// OnUpdate records a proxy's change (its binding, its deletion).
func (b *ProxyBook) OnUpdate(_, obj any) { b.record(obj) }

// OnDelete forgets a proxy.
func (b *ProxyBook) OnDelete(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.byController[ref.UID]
	if c == nil {
		return
	}
	key := client.ObjectKeyFromObject(pod)
	if old, ok := c.facts[key]; ok {
		c.tally(old, -1)
		delete(c.facts, key)
	}
	if len(c.facts) == 0 {
		delete(b.byController, ref.UID)
	}
}

func (b *ProxyBook) record(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return // a controller's pods are counted, a bare pod is not
	}
	cluster, _ := strings.CutPrefix(pod.Spec.NodeName, flotillav1.VirtualNodePrefix)
	if cluster == pod.Spec.NodeName {
		cluster = ""
	}
	facts := proxyFacts{cluster: cluster, created: pod.CreationTimestamp.Time,
		admittedBy: pod.Annotations[flotillav1.AnnotationAdmittedBy], deleting: pod.DeletionTimestamp != nil}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byController == nil {
		b.byController = map[types.UID]*controllerProxies{}
	}
	c := b.byController[ref.UID]
	if c == nil {
		c = &controllerProxies{facts: map[types.NamespacedName]proxyFacts{}, live: map[string]int{}, byCreation: map[int64]map[boundBy]int{}}
		b.byController[ref.UID] = c
	}
	key := client.ObjectKeyFromObject(pod)
	if old, ok := c.facts[key]; ok {
		c.tally(old, -1)
	}
	c.facts[key] = facts
	c.tally(facts, 1)
}

// counts are the controller's counted proxies per cluster, and of them, per cluster, those created
// at or after since and admitted by replica (by any replica when replica is ""): a copy, made
// under the book's read lock in time that does not grow with the controller's proxies.
func (b *ProxyBook) counts(uid types.UID, replica string, since time.Time) (live, createdSince map[string]int) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	live, createdSince = map[string]int{}, map[string]int{}
	c := b.byController[uid]
	if c == nil {
		return live, createdSince
	}
	for cluster, n := range c.live {
		live[cluster] = n
	}
	from := since.Unix()
	for sec, bucket := range c.byCreation {
		if sec < from {
			continue
		}
		for k, n := range bucket {
			if replica == "" || k.by == replica {
				createdSince[k.cluster] += n
			}
		}
	}
	return live, createdSince
}

// Spread gathers, for an elected pod with a controller, how many of that controller's proxies
// each cluster holds (placement.ClusterView.Siblings, by which placement spreads a controller's pods), and
// serialises the admissions of one controller's pods so that a burst of them (a ReplicaSet
// creating 100 pods at once) spreads: each admission counts the ones before it, also while the
// cache has not yet seen their pods.
type Spread struct {
	// Proxies is the book of the manager's cached proxies.
	Proxies *ProxyBook
	// Window is how long an admission is remembered while the cache may not show its pod yet
	// (10 s when zero).
	Window time.Duration
	// Clock tells the time of admissions, to match them against the cache within Window (the
	// real clock when nil).
	Clock clock.PassiveClock
	// Replica names this manager replica in the proxies it admits
	// (flotillav1.AnnotationAdmittedBy), so that only its own admissions are matched against the
	// cache: with two replicas serving the webhook, each counts the other's proxies once they are
	// cached.
	Replica string

	mu       sync.Mutex
	admitted map[types.UID][]recentAdmission
	pruned   time.Time
}

type recentAdmission struct {
	cluster string
	at      time.Time
}

func (s *Spread) now() time.Time { return clocks.Now(s.Clock) }

func (s *Spread) window() time.Duration {
	if s.Window > 0 {
		return s.Window
	}
	return 10 * time.Second
}

// Place runs decide with the clusters' Siblings filled in for the pod's controller and remembers
// where decide bound the proxy, unless dryRun: a dry run creates no pod, so it is decided as a
// real one would be and leaves nothing behind (the webhook declares no side effects). A pod
// without a controller, or a Spread without a cache, is decided with no siblings.
func (s *Spread) Place(ctx context.Context, pod *corev1.Pod, views []placement.ClusterView, dryRun bool, decide func([]placement.ClusterView) (*corev1.Pod, error)) (*corev1.Pod, error) {
	ref := metav1.GetControllerOf(pod)
	if s == nil || s.Proxies == nil || ref == nil {
		return decide(views)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.prune(now)
	siblings := s.siblings(ref.UID, now)
	counted := make([]placement.ClusterView, len(views))
	for i, v := range views {
		v.Siblings = siblings[v.Name]
		counted[i] = v
	}
	out, err := decide(counted)
	if err != nil || out == nil || !strings.HasPrefix(out.Spec.NodeName, flotillav1.VirtualNodePrefix) {
		return out, err
	}
	if s.Replica != "" {
		out.Annotations[flotillav1.AnnotationAdmittedBy] = s.Replica
	}
	if dryRun {
		return out, nil
	}
	if s.admitted == nil {
		s.admitted = map[types.UID][]recentAdmission{}
	}
	s.admitted[ref.UID] = append(s.admitted[ref.UID], recentAdmission{cluster: strings.TrimPrefix(out.Spec.NodeName, flotillav1.VirtualNodePrefix), at: now})
	return out, nil
}

// siblings counts the controller's live proxies per cluster in the cache, plus its admissions by
// this replica in the window the cache does not show yet: per cluster, those admitted in the window
// less the cached proxies this replica admitted in it (creation timestamps have whole seconds,
// hence the second's slack). What another replica admits counts once its cache shows it.
func (s *Spread) siblings(uid types.UID, now time.Time) map[string]int {
	recent := map[string]int{}
	var since time.Time
	for _, p := range s.admitted[uid] {
		if now.Sub(p.at) >= s.window() {
			continue
		}
		recent[p.cluster]++
		if since.IsZero() || p.at.Before(since) {
			since = p.at
		}
	}
	if since.IsZero() {
		since = now
	}
	since = since.Truncate(time.Second).Add(-time.Second)
	counts, cachedSince := s.Proxies.counts(uid, s.Replica, since)
	for cluster, n := range recent {
		// The admissions the cache shows already are in its counts.
		counts[cluster] += max(0, n-cachedSince[cluster])
	}
	for cluster, n := range counts {
		if n == 0 {
			delete(counts, cluster)
		}
	}
	return counts
}

// prune forgets admissions older than the window, at most once per window.
func (s *Spread) prune(now time.Time) {
	if now.Sub(s.pruned) < s.window() {
		return
	}
	s.pruned = now
	for uid, list := range s.admitted {
		kept := list[:0]
		for _, p := range list {
			if now.Sub(p.at) < s.window() {
				kept = append(kept, p)
			}
		}
		if len(kept) == 0 {
			delete(s.admitted, uid)
		} else {
			s.admitted[uid] = kept
		}
	}
}
