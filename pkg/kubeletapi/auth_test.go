package kubeletapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// countingPrimary is a fake primary that counts TokenReviews, SubjectAccessReviews and pod reads.
// Tokens in valid authenticate as alice; SubjectAccessReviews answer allowed.
type countingPrimary struct {
	*fake.Clientset
	tokenReviews, sars, podGets atomic.Int64
}

func newCountingPrimary(valid map[string]bool, allowed bool) *countingPrimary {
	c := &countingPrimary{Clientset: fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "proxy-uid-1"},
		Spec: corev1.PodSpec{NodeName: "flotilla-eu"}})}
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c.tokenReviews.Add(1)
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if valid[tr.Spec.Token] {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true,
				User: authenticationv1.UserInfo{Username: "alice", UID: "alice-uid", Groups: []string{"system:authenticated"}}}
		} else {
			tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		return true, tr, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c.sars.Add(1)
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		sar.Status.Allowed = allowed
		return true, sar, nil
	})
	c.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		c.podGets.Add(1)
		return false, nil, nil // the tracker answers
	})
	return c
}

// serve runs one request through the kubelet API's authentication and authorisation, at the port
// of the proxy's node; the kubelet handlers are replaced by one that answers 200.
func serve(h http.Handler, path, token string) int {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	withNode("flotilla-eu", h).ServeHTTP(w, r)
	return w.Code
}

var ok200 = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

func TestABogusTokenRepeatedIsReviewedOnce(t *testing.T) {
	primary := newCountingPrimary(nil, true)
	h := (&Server{Primary: primary, Secondaries: secondariesMap{}}).authenticated(ok200)
	// 1000 requests from 8 goroutines at once: concurrent misses of one token share one review.
	var wg sync.WaitGroup
	var unauthorized atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 125 {
				if serve(h, "/containerLogs/ns/web/app", "bogus") == http.StatusUnauthorized {
					unauthorized.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := unauthorized.Load(); got != 1000 {
		t.Errorf("%d of 1000 answered 401", got)
	}
	if got := primary.tokenReviews.Load(); got > 1 {
		t.Errorf("%d TokenReviews for one bogus token, want at most 1", got)
	}
}

func TestAnUnauthorizedCallerCausesNoPodRead(t *testing.T) {
	primary := newCountingPrimary(map[string]bool{"alice-token": true}, false)
	h := (&Server{Primary: primary, Secondaries: secondariesMap{}}).authenticated(ok200)
	for _, path := range []string{"/containerLogs/ns/web/app", "/exec/ns/web/app", "/portForward/ns/web", "/exec/ns/no-such-pod/app"} {
		// A pod that does not exist is 403 too: an unauthorised caller learns nothing of the pods.
		if got := serve(h, path, "alice-token"); got != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", path, got)
		}
	}
	if got := primary.podGets.Load(); got != 0 {
		t.Errorf("%d pod reads for a caller not allowed, want none", got)
	}
}

func TestReviewsAreCachedAsAKubeletCachesThem(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	primary := newCountingPrimary(map[string]bool{"alice-token": true}, true)
	h := (&Server{Primary: primary, Secondaries: secondariesMap{}, Clock: clk}).authenticated(ok200)
	expect := func(when string, token string, code int, reviews, sars int64) {
		t.Helper()
		if got := serve(h, "/containerLogs/ns/web/app", token); got != code {
			t.Errorf("%s: %d, want %d", when, got, code)
		}
		if got := primary.tokenReviews.Load(); got != reviews {
			t.Errorf("%s: %d TokenReviews, want %d", when, got, reviews)
		}
		if got := primary.sars.Load(); got != sars {
			t.Errorf("%s: %d SubjectAccessReviews, want %d", when, got, sars)
		}
	}
	expect("first", "alice-token", http.StatusOK, 1, 1)
	expect("again", "alice-token", http.StatusOK, 1, 1)
	expect("a bogus token", "bogus", http.StatusUnauthorized, 2, 1)
	clk.SetTime(clk.Now().Add(tokenCacheTTL - time.Second))
	expect("just within the token TTL", "bogus", http.StatusUnauthorized, 2, 1)
	expect("alice within both TTLs", "alice-token", http.StatusOK, 2, 1)
	clk.SetTime(clk.Now().Add(2 * time.Second))
	expect("the bogus token past its TTL", "bogus", http.StatusUnauthorized, 3, 1)
	expect("alice's token past its TTL, her right within its", "alice-token", http.StatusOK, 4, 1)
	clk.SetTime(clk.Now().Add(allowedCacheTTL))
	expect("alice's right past its TTL", "alice-token", http.StatusOK, 5, 2)
}

func TestADenialIsCachedShorter(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	primary := newCountingPrimary(map[string]bool{"alice-token": true}, false)
	h := (&Server{Primary: primary, Secondaries: secondariesMap{}, Clock: clk}).authenticated(ok200)
	for range 3 {
		if got := serve(h, "/exec/ns/web/app", "alice-token"); got != http.StatusForbidden {
			t.Errorf("%d, want 403", got)
		}
	}
	if got := primary.sars.Load(); got != 1 {
		t.Errorf("%d SubjectAccessReviews within the denial's TTL, want 1", got)
	}
	clk.SetTime(clk.Now().Add(deniedCacheTTL + time.Second))
	serve(h, "/exec/ns/web/app", "alice-token")
	if got := primary.sars.Load(); got != 2 {
		t.Errorf("%d SubjectAccessReviews past the denial's TTL, want 2", got)
	}
}

func TestTheCacheNeverHoldsAToken(t *testing.T) {
	primary := newCountingPrimary(map[string]bool{"alice-token": true}, true)
	g := newGate(primary, nil, 0, logr.Discard())
	h := (&Server{Primary: primary, Secondaries: secondariesMap{}}).admitWith(g, ok200)
	serve(h, "/containerLogs/ns/web/app", "alice-token")
	serve(h, "/containerLogs/ns/web/app", "bogus-secret")
	keys := append(g.tokens.Keys(), g.decisions.Keys()...)
	if len(keys) != 3 {
		t.Errorf("%d cache entries, want 3 (two tokens, one decision)", len(keys))
	}
	for _, k := range keys {
		if s := fmt.Sprint(k); strings.Contains(s, "alice-token") || strings.Contains(s, "bogus-secret") {
			t.Errorf("cache key %q holds a token", s)
		}
	}
}

func TestPastMaxInFlightARequestIsRefusedNotQueued(t *testing.T) {
	primary := newCountingPrimary(map[string]bool{"alice-token": true}, true)
	entered, release := make(chan struct{}), make(chan struct{})
	primary.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).Spec.Token == "slow" {
			close(entered)
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
		}
		return false, nil, nil // the counting reactor answers
	})
	h := (&Server{Primary: primary, Secondaries: secondariesMap{}, MaxInFlight: 1}).authenticated(ok200)
	serve(h, "/containerLogs/ns/web/app", "alice-token") // cached from now on

	slow := make(chan int, 1)
	go func() { slow <- serve(h, "/containerLogs/ns/web/app", "slow") }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first review never started")
	}
	r := httptest.NewRequest(http.MethodGet, "/containerLogs/ns/web/app", nil)
	r.Header.Set("Authorization", "Bearer another")
	w := httptest.NewRecorder()
	withNode("flotilla-eu", h).ServeHTTP(w, r)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Errorf("a second review while one is in flight: %d (Retry-After %q), want 429 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	if got := serve(h, "/containerLogs/ns/web/app", "alice-token"); got != http.StatusOK {
		t.Errorf("a cached caller while the reviews are full: %d, want 200", got)
	}
	close(release)
	if got := <-slow; got != http.StatusUnauthorized {
		t.Errorf("the slow bogus token: %d, want 401", got)
	}
	if got := serve(h, "/containerLogs/ns/web/app", "another"); got != http.StatusUnauthorized {
		t.Errorf("the refused token once a slot is free: %d, want 401", got)
	}
}
