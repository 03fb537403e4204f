package webhook

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/election"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

func ownedBy(uid types.UID) podOpt {
	return func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: uid, Controller: &yes}}
	}
}

// equalClusters have the same free capacity: without spreading, every placement is a coin toss.
var equalClusters = []placement.ClusterView{clusterOf("eu", true, "4", nil), clusterOf("us", true, "4", nil)}

func place(t *testing.T, s *Spread, pod *corev1.Pod) string {
	t.Helper()
	pickFirst := func([]int64) int { return 0 }
	out, err := s.Place(t.Context(), pod, equalClusters, false, func(views []placement.ClusterView) (*corev1.Pod, error) {
		return election.Mutate(t.Context(), pod, views, nil, election.Options{Choose: pickFirst})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Spec.NodeName[len(flotillav1.VirtualNodePrefix):]
}

// proxyCache is a book of the proxies as the cache's informer would have fed it.
func proxyCache(t *testing.T, objs ...*corev1.Pod) *ProxyBook {
	t.Helper()
	b := &ProxyBook{}
	for _, o := range objs {
		b.OnAdd(o, true)
	}
	return b
}

func proxyOn(name, cluster string, uid types.UID, created time.Time) *corev1.Pod {
	p := elected(ownedBy(uid))
	p.Name, p.Spec.NodeName, p.CreationTimestamp = name, flotillav1.VirtualNodeName(cluster), metav1.NewTime(created)
	return p
}

func TestSpreadPlacesABurstOfOneControllersPodsEvenly(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	s := &Spread{Proxies: proxyCache(t), Clock: clocktesting.NewFakePassiveClock(now)}
	count := map[string]int{}
	for range 10 {
		count[place(t, s, elected(ownedBy("rs-1")))]++
	}
	if count["eu"] != 5 || count["us"] != 5 {
		t.Errorf("10 pods of one ReplicaSet placed %v, want 5 and 5", count)
	}
	// Another controller starts from its own zero.
	if got := place(t, s, elected(ownedBy("rs-2"))); got != "eu" {
		t.Errorf("first pod of another ReplicaSet went to %s, want eu (capacity breaks the tie)", got)
	}
}

func TestSpreadCountsAnAdmittedPodOnceWhenTheCacheShowsIt(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	// eu already holds 2 older proxies; one more was just admitted there and is now cached.
	cache := proxyCache(t,
		proxyOn("old-1", "eu", "rs-1", now.Add(-time.Hour)), proxyOn("old-2", "eu", "rs-1", now.Add(-time.Hour)),
		proxyOn("old-3", "us", "rs-1", now.Add(-time.Hour)), proxyOn("new-1", "us", "rs-1", now))
	s := &Spread{Proxies: cache, Clock: clocktesting.NewFakePassiveClock(now)}
	s.admitted = map[types.UID][]recentAdmission{"rs-1": {{cluster: "us", at: now}}}
	got := s.siblings("rs-1", now)
	if got["eu"] != 2 || got["us"] != 2 {
		t.Errorf("siblings %v, want eu 2 and us 2 (new-1 counted once)", got)
	}
}

func TestSpreadIgnoresTerminatingProxiesAndForgetsOldAdmissions(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	gone := proxyOn("gone", "eu", "rs-1", now.Add(-time.Hour))
	gone.DeletionTimestamp, gone.Finalizers = &metav1.Time{Time: now}, []string{flotillav1.FinalizerDelegate}
	s := &Spread{Proxies: proxyCache(t, gone), Clock: clocktesting.NewFakePassiveClock(now)}
	s.admitted = map[types.UID][]recentAdmission{"rs-1": {{cluster: "eu", at: now.Add(-time.Minute)}}}
	got := s.siblings("rs-1", now)
	if len(got) != 0 {
		t.Errorf("siblings %v, want none (terminating proxy, admission older than the window)", got)
	}
	s.prune(now)
	if len(s.admitted) != 0 {
		t.Errorf("pruned ledger still holds %v", s.admitted)
	}
}

func TestSpreadLeavesPodsWithoutAControllerToCapacity(t *testing.T) {
	s := &Spread{Proxies: proxyCache(t)}
	for i := range 3 {
		if got := place(t, s, elected()); got != "eu" {
			t.Fatalf("bare pod %d went to %s, want eu every time (no siblings to spread from)", i, got)
		}
	}
	if len(s.admitted) != 0 {
		t.Errorf("bare pods were remembered: %v", s.admitted)
	}
	var nilSpread *Spread
	if got := place(t, nilSpread, elected(ownedBy("rs-1"))); got != "eu" {
		t.Errorf("nil Spread placed on %s", got)
	}
}

// Two replicas serve the webhook, two admissions each in turn (the API server keeps a connection
// to one replica for a while), and the shared cache shows each proxy only three
// admissions later. Matching only its own admissions against the cache, neither replica takes the
// other's cached proxies for its own pending ones (which it would then count nowhere), and the
// burst ends even.
func TestSpreadOverTwoReplicasEndsEven(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	cache := proxyCache(t)
	replicas := []*Spread{
		{Proxies: cache, Replica: "a", Clock: clocktesting.NewFakePassiveClock(now)},
		{Proxies: cache, Replica: "b", Clock: clocktesting.NewFakePassiveClock(now)},
	}
	const lag = 3
	var inFlight []*corev1.Pod
	count := map[string]int{}
	for i := range 12 {
		pod := elected(ownedBy("rs-1"))
		out, err := replicas[(i/2)%2].Place(t.Context(), pod, equalClusters, false, func(views []placement.ClusterView) (*corev1.Pod, error) {
			return election.Mutate(t.Context(), pod, views, nil, election.Options{Choose: func([]int64) int { return 0 }})
		})
		if err != nil {
			t.Fatal(err)
		}
		out.Name, out.CreationTimestamp = fmt.Sprintf("web-%d", i), metav1.NewTime(now)
		count[out.Spec.NodeName[len(flotillav1.VirtualNodePrefix):]]++
		if inFlight = append(inFlight, out); len(inFlight) > lag {
			cache.OnAdd(inFlight[0], false)
			inFlight = inFlight[1:]
		}
	}
	if count["eu"] != 6 || count["us"] != 6 {
		t.Errorf("12 pods over two replicas placed %v, want 6 and 6", count)
	}
}

// The book follows the proxy informer's events: a binding, a deletion under way, the delete
// (also as a tombstone), and pods without a controller left out.
func TestProxyBookFollowsTheInformersEvents(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	count := func(b *ProxyBook) map[string]int {
		s := &Spread{Proxies: b, Clock: clocktesting.NewFakePassiveClock(now)}
		return s.siblings("rs-1", now)
	}
	b := proxyCache(t)
	unbound := proxyOn("web-1", "eu", "rs-1", now.Add(-time.Hour))
	unbound.Spec.NodeName = ""
	b.OnAdd(unbound, false)
	b.OnAdd(elected(), false) // no controller
	if got := count(b); len(got) != 0 {
		t.Errorf("an unbound proxy counted: %v", got)
	}
	bound := proxyOn("web-1", "eu", "rs-1", now.Add(-time.Hour))
	b.OnUpdate(unbound, bound)
	b.OnAdd(proxyOn("web-2", "us", "rs-1", now.Add(-time.Hour)), false)
	if got := count(b); got["eu"] != 1 || got["us"] != 1 {
		t.Errorf("siblings %v, want eu 1 and us 1", got)
	}
	deleting := bound.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	b.OnUpdate(bound, deleting)
	if got := count(b); got["eu"] != 0 || got["us"] != 1 {
		t.Errorf("siblings %v, want the terminating proxy left out", got)
	}
	b.OnDelete(deleting)
	b.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "demo/web-2", Obj: proxyOn("web-2", "us", "rs-1", now.Add(-time.Hour))})
	if got := count(b); len(got) != 0 || len(b.byController) != 0 {
		t.Errorf("siblings %v, book %v: want nothing left after the deletes", got, b.byController)
	}
}

// The book's tallies, kept up to date at each event so that an admission costs the same whatever
// the number of its controller's proxies, agree after any run of events with a count of the
// proxies themselves, made as Spread counted them before it kept tallies: per cluster the bound
// proxies not being deleted, and of them those created since a moment and admitted by a replica.
func TestProxyBookTalliesAgreeWithACountOfItsProxies(t *testing.T) {
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	clusters, replicas := []string{"", "eu", "us", "ap"}, []string{"manager-0", "manager-1"}
	b := proxyCache(t)
	pods := map[string]*corev1.Pod{}
	step := uint64(7)
	next := func(n int) int { // a fixed pseudo-random sequence: the run is the same each time
		step = step*6364136223846793005 + 1442695040888963407
		return int((step >> 33) % uint64(n))
	}
	newest := start
	for i := range 6000 {
		name := fmt.Sprintf("web-%d", next(400))
		old, exists := pods[name]
		switch op := next(10); {
		case exists && op == 0:
			if next(2) == 0 {
				b.OnDelete(old)
			} else {
				b.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "demo/" + name, Obj: old})
			}
			delete(pods, name)
		case exists && op <= 3:
			changed := old.DeepCopy()
			if next(3) == 0 {
				changed.DeletionTimestamp = &metav1.Time{Time: newest}
			} else {
				changed.Spec.NodeName = ""
				if c := clusters[next(len(clusters))]; c != "" {
					changed.Spec.NodeName = flotillav1.VirtualNodeName(c)
				}
			}
			b.OnUpdate(old, changed)
			pods[name] = changed
		case !exists:
			// Creations move on about a second every 10 events (20 minutes in all, past what
			// the book keeps), some of them a few seconds late.
			created := start.Add(time.Duration(i/10)*time.Second - time.Duration(next(5))*time.Second)
			if created.After(newest) {
				newest = created
			}
			p := proxyOn(name, "eu", "rs-1", created)
			p.Spec.NodeName = ""
			if c := clusters[next(len(clusters))]; c != "" {
				p.Spec.NodeName = flotillav1.VirtualNodeName(c)
			}
			p.Annotations[flotillav1.AnnotationAdmittedBy] = replicas[next(2)]
			b.OnAdd(p, false)
			pods[name] = p
		}
		since := newest.Add(-time.Duration(next(12)) * time.Second)
		replica := []string{"", "manager-0", "manager-1"}[next(3)]
		wantLive, wantSince := map[string]int{}, map[string]int{}
		for _, p := range pods {
			cluster, bound := strings.CutPrefix(p.Spec.NodeName, flotillav1.VirtualNodePrefix)
			if !bound || p.DeletionTimestamp != nil {
				continue
			}
			wantLive[cluster]++
			if !p.CreationTimestamp.Time.Before(since) && (replica == "" || p.Annotations[flotillav1.AnnotationAdmittedBy] == replica) {
				wantSince[cluster]++
			}
		}
		live, createdSince := b.counts("rs-1", replica, since)
		if !maps.Equal(live, wantLive) || !maps.Equal(createdSince, wantSince) {
			t.Fatalf("event %d: the book says %v live, %v since %s by %q; its proxies say %v and %v",
				i, live, createdSince, since.Format(time.TimeOnly), replica, wantLive, wantSince)
		}
	}
	if len(b.byController["rs-1"].byCreation) > bookSeconds+1 {
		t.Errorf("the book keeps %d seconds of creations, want at most %d", len(b.byController["rs-1"].byCreation), bookSeconds+1)
	}
}
