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
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// ProxyBook keeps, per controller, the few facts Spread counts of each of its proxies in the
// manager's cache: fed by the proxy informer's events (AddEventHandler), read with no copy of a
// pod. Listing the controller's proxies from the cache at each admission copied every one of them
// (about 1 KiB each, under the lock all admissions of a controller take): a 1000-pod burst
// allocated half a gigabyte and its admissions waited in line (bench: 232 ms per call in the
// handler).
type ProxyBook struct {
	mu           sync.RWMutex
	byController map[types.UID]map[types.NamespacedName]proxyFacts
}

// proxyFacts is what Spread reads of one proxy.
type proxyFacts struct {
	cluster    string // "" while not bound to a virtual node
	created    time.Time
	admittedBy string
	deleting   bool
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
	if proxies := b.byController[ref.UID]; proxies != nil {
		delete(proxies, client.ObjectKeyFromObject(pod))
		if len(proxies) == 0 {
			delete(b.byController, ref.UID)
		}
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
		admittedBy: pod.Annotations[AnnotationAdmittedBy], deleting: pod.DeletionTimestamp != nil}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byController == nil {
		b.byController = map[types.UID]map[types.NamespacedName]proxyFacts{}
	}
	proxies := b.byController[ref.UID]
	if proxies == nil {
		proxies = map[types.NamespacedName]proxyFacts{}
		b.byController[ref.UID] = proxies
	}
	proxies[client.ObjectKeyFromObject(pod)] = facts
}

// each calls visit with the facts of each proxy of the controller (under the book's read lock:
// visit must not call the book).
func (b *ProxyBook) each(uid types.UID, visit func(proxyFacts)) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for _, f := range b.byController[uid] {
		visit(f)
	}
}

// AnnotationAdmittedBy names, on a proxy, the manager replica whose webhook admitted it.
const AnnotationAdmittedBy = "flotilla.dev/admitted-by"

// Spread gathers, for an elected pod with a controller, how many of that controller's proxies
// each cluster holds (ClusterView.Siblings), and serialises the admissions of one controller's pods
// so that a burst of them (a ReplicaSet creating 100 pods at once) spreads: each admission counts
// the ones before it, also while the cache has not yet seen their pods.
type Spread struct {
	// Proxies is the book of the manager's cached proxies.
	Proxies *ProxyBook
	// Window is how long an admission is remembered while the cache may not show its pod yet
	// (10 s when zero).
	Window time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Replica names this manager replica in the proxies it admits (AnnotationAdmittedBy), so
	// that only its own admissions are matched against the cache: with two replicas serving the
	// webhook, each counts the other's proxies once they are cached.
	Replica string

	mu       sync.Mutex
	admitted map[types.UID][]recentAdmission
	pruned   time.Time
}

type recentAdmission struct {
	cluster string
	at      time.Time
}

func (s *Spread) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Spread) window() time.Duration {
	if s.Window > 0 {
		return s.Window
	}
	return 10 * time.Second
}

// Place runs decide with the clusters' Siblings filled in for the pod's controller and remembers
// where decide bound the proxy. A pod without a controller, or a Spread without a cache, is decided
// with no siblings.
func (s *Spread) Place(ctx context.Context, pod *corev1.Pod, views []ClusterView, decide func([]ClusterView) (*corev1.Pod, error)) (*corev1.Pod, error) {
	ref := metav1.GetControllerOf(pod)
	if s == nil || s.Proxies == nil || ref == nil {
		return decide(views)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.prune(now)
	siblings := s.siblings(ref.UID, now)
	counted := make([]ClusterView, len(views))
	for i, v := range views {
		v.Siblings = siblings[v.Name]
		counted[i] = v
	}
	out, err := decide(counted)
	if err != nil || out == nil || !strings.HasPrefix(out.Spec.NodeName, flotillav1.VirtualNodePrefix) {
		return out, err
	}
	if s.Replica != "" {
		out.Annotations[AnnotationAdmittedBy] = s.Replica
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
	counts := map[string]int{}
	s.Proxies.each(uid, func(p proxyFacts) {
		if p.cluster == "" || p.deleting {
			return
		}
		counts[p.cluster]++
		ours := s.Replica == "" || p.admittedBy == s.Replica
		if ours && !p.created.Before(since) && recent[p.cluster] > 0 {
			recent[p.cluster]--
		}
	})
	for cluster, n := range recent {
		counts[cluster] += n
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
