package webhook

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// ControllerIndex is the field index of the manager's proxy cache that Spread lists by: the UID
// of a proxy's controlling owner.
const ControllerIndex = "flotilla.dev/controller-uid"

// ControllerUIDOf is the ControllerIndex function.
func ControllerUIDOf(obj client.Object) []string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return []string{string(ref.UID)}
	}
	return nil
}

// AnnotationAdmittedBy names, on a proxy, the manager replica whose webhook admitted it.
const AnnotationAdmittedBy = "flotilla.dev/admitted-by"

// Spread gathers, for an elected pod with a controller, how many of that controller's proxies
// each cluster holds (ClusterView.Siblings), and serialises the admissions of one controller's pods
// so that a burst of them (a ReplicaSet creating 100 pods at once) spreads: each admission counts
// the ones before it, also while the cache has not yet seen their pods.
type Spread struct {
	// Proxies is the manager's cache of proxies, indexed by ControllerIndex.
	Proxies client.Reader
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
	siblings, err := s.siblings(ctx, pod.Namespace, ref.UID, now)
	if err != nil {
		return nil, err
	}
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
func (s *Spread) siblings(ctx context.Context, namespace string, uid types.UID, now time.Time) (map[string]int, error) {
	var proxies corev1.PodList
	// Read only, under the lock every admission of the controller takes: deep copies of each of its
	// proxies at each admission made a 1000-pod burst quadratic (bench: 48 s against 34 s).
	if err := s.Proxies.List(ctx, &proxies, client.InNamespace(namespace), client.MatchingFields{ControllerIndex: string(uid)},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the proxies of controller %s: %w", uid, err)
	}
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
	for i := range proxies.Items {
		p := &proxies.Items[i]
		cluster, ok := strings.CutPrefix(p.Spec.NodeName, flotillav1.VirtualNodePrefix)
		if !ok || p.DeletionTimestamp != nil {
			continue
		}
		counts[cluster]++
		ours := s.Replica == "" || p.Annotations[AnnotationAdmittedBy] == s.Replica
		if ours && !p.CreationTimestamp.Time.Before(since) && recent[cluster] > 0 {
			recent[cluster]--
		}
	}
	for cluster, n := range recent {
		counts[cluster] += n
	}
	return counts, nil
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
