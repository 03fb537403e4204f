package webhook

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/pkg/election"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

// countingReader knows some claims by name and counts every Get, by key.
type countingReader struct {
	mu    sync.Mutex
	known map[string]bool
	gets  map[string]int
}

func (r *countingReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gets == nil {
		r.gets = map[string]int{}
	}
	r.gets[key.String()]++
	if !r.known[key.Name] {
		return apierrors.NewNotFound(corev1.Resource("persistentvolumeclaims"), key.Name)
	}
	obj.SetName(key.Name)
	return nil
}

func (r *countingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("not listed")
}

func (r *countingReader) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.gets {
		n += c
	}
	return n
}

func podWithClaims(names ...string) *corev1.Pod {
	p := &corev1.Pod{}
	p.Namespace, p.Name = "shop", "web-0"
	for i, n := range names {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: fmt.Sprintf("v%d", i),
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: n}}})
	}
	return p
}

// A request is untrusted: the claims it names are read from the cache, each name once, and live
// only what the cache lacks, at the pace of the webhook's own limiter.
func TestClaimViewsReadEachClaimOnceFromTheCacheAndLiveOnlyWithinTheLimiter(t *testing.T) {
	t.Run("a hundred volumes on one claim the cache has: one read, none live", func(t *testing.T) {
		cache, live := &countingReader{known: map[string]bool{"data": true}}, &countingReader{}
		h := &Handler{Claims: cache, LiveClaims: live, LiveReads: rate.NewLimiter(rate.Inf, 1)}
		names := make([]string, 100)
		for i := range names {
			names[i] = "data"
		}
		views, err := h.claimViews(t.Context(), podWithClaims(names...))
		if err != nil || !views["data"].Found {
			t.Fatalf("views %v, err %v", views, err)
		}
		if cache.total() != 1 || live.total() != 0 {
			t.Errorf("cache reads %d, live reads %d; want 1 and 0", cache.total(), live.total())
		}
	})
	t.Run("a claim the cache has not seen yet: read live once", func(t *testing.T) {
		cache, live := &countingReader{}, &countingReader{known: map[string]bool{"new": true}}
		h := &Handler{Claims: cache, LiveClaims: live, LiveReads: rate.NewLimiter(rate.Inf, 1)}
		views, err := h.claimViews(t.Context(), podWithClaims("new", "new", "new"))
		if err != nil || !views["new"].Found {
			t.Fatalf("views %v, err %v", views, err)
		}
		if live.total() != 1 {
			t.Errorf("live reads %d, want 1", live.total())
		}
	})
	t.Run("more missing claims than the limiter allows: refused, the API server read only as allowed", func(t *testing.T) {
		cache, live := &countingReader{}, &countingReader{}
		h := &Handler{Claims: cache, LiveClaims: live, LiveReads: rate.NewLimiter(rate.Limit(0.001), 3)}
		var names []string
		for i := range 300 {
			names = append(names, fmt.Sprintf("c%d", i))
		}
		_, err := h.claimViews(t.Context(), podWithClaims(names...))
		if !errors.Is(err, errLiveReads) {
			t.Fatalf("err %v, want the limiter's refusal", err)
		}
		if live.total() != 3 {
			t.Errorf("live reads %d, want the limiter's burst, 3", live.total())
		}
	})
}

// A dry run is decided as a real admission would be, and leaves nothing in the spread's memory.
func TestSpreadRemembersNoDryRun(t *testing.T) {
	s := &Spread{Proxies: proxyCache(t)}
	pod := elected(ownedBy(types.UID("rs-1")))
	pickFirst := func([]int64) int { return 0 }
	for range 3 {
		out, err := s.Place(t.Context(), pod, equalClusters, true, func(views []placement.ClusterView) (*corev1.Pod, error) {
			return election.Mutate(t.Context(), pod, views, nil, election.Options{Choose: pickFirst})
		})
		if err != nil || out == nil {
			t.Fatalf("dry run: %v", err)
		}
	}
	if n := len(s.admitted[types.UID("rs-1")]); n != 0 {
		t.Fatalf("%d dry runs remembered, want none", n)
	}
	if got := place(t, s, pod); got != "eu" {
		t.Errorf("the first real admission went to %s: the dry runs counted", got)
	}
}
