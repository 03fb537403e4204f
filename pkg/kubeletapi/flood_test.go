package kubeletapi

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/flotilla-dev/flotilla/pkg/pki"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// fakeAPIServer is a primary's API server that answers what the kubelet API and a Lease renewal
// ask, counts it, and, like API Priority and Fairness for one identity, serves only so many
// requests a second: the rest are answered 429 with Retry-After (client-go waits and retries).
type fakeAPIServer struct {
	*httptest.Server
	capacity *rate.Limiter
	caPEM    string

	tokenReviews, sars, podGets, refused, leaseUpdates, leasesRefused atomic.Int64
}

func newFakeAPIServer(t *testing.T, perSecond float64) *fakeAPIServer {
	ca, err := pki.NewCA("flotilla-test-client-ca", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// A burst of half a second's worth: API Priority and Fairness queues a short burst.
	f := &fakeAPIServer{capacity: rate.NewLimiter(rate.Limit(perSecond), int(perSecond)/2), caPEM: string(ca.CertPEM)}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPIServer) serve(w http.ResponseWriter, r *http.Request) {
	lease := strings.HasPrefix(r.URL.Path, "/apis/coordination.k8s.io/")
	if !f.capacity.Allow() {
		f.refused.Add(1)
		if lease {
			f.leasesRefused.Add(1)
		}
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusTooManyRequests, &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
			Status: metav1.StatusFailure, Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests,
			Message: "too many requests, please try again later"})
		return
	}
	switch {
	case lease && r.Method == http.MethodPut:
		f.leaseUpdates.Add(1)
		var l coordinationv1.Lease
		_ = json.NewDecoder(r.Body).Decode(&l)
		writeJSON(w, http.StatusOK, &l)
	case r.URL.Path == "/apis/authentication.k8s.io/v1/tokenreviews":
		f.tokenReviews.Add(1)
		var tr authenticationv1.TokenReview
		_ = json.NewDecoder(r.Body).Decode(&tr)
		tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		writeJSON(w, http.StatusCreated, &tr)
	case r.URL.Path == "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		f.sars.Add(1)
		var sar authorizationv1.SubjectAccessReview
		_ = json.NewDecoder(r.Body).Decode(&sar)
		writeJSON(w, http.StatusCreated, &sar)
	case r.URL.Path == "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication":
		writeJSON(w, http.StatusOK, &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "extension-apiserver-authentication"},
			Data:       map[string]string{"client-ca-file": f.caPEM}})
	default:
		if strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/") && strings.Contains(r.URL.Path, "/pods/") {
			f.podGets.Add(1)
		}
		writeJSON(w, http.StatusNotFound, &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
			Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound})
	}
}

func writeJSON(w http.ResponseWriter, code int, obj any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(obj)
}

// renewals is what a Lease renewal loop saw.
type renewals struct {
	done, failed int
	slowest      time.Duration
}

// leaseRequest marks the context of a Lease renewal, for waitMeter.
type leaseRequest struct{}

// waitMeter is a client's rate limiter that records the longest wait of a Lease renewal in it
// (client-go hands the limiter each request's context).
type waitMeter struct {
	flowcontrol.RateLimiter
	mu      sync.Mutex
	longest time.Duration
}

func (m *waitMeter) Wait(ctx context.Context) error {
	start := time.Now()
	err := m.RateLimiter.Wait(ctx)
	if ctx.Value(leaseRequest{}) != nil {
		m.mu.Lock()
		m.longest = max(m.longest, time.Since(start))
		m.mu.Unlock()
	}
	return err
}

func (m *waitMeter) longestLeaseWait() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.longest
}

// renewLeases updates a virtual node's Lease every interval, as virtual-kubelet's lease controller
// does (every 5 s in the manager), until ctx ends.
func renewLeases(ctx context.Context, client kubernetes.Interface, interval time.Duration) renewals {
	var seen renewals
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: "flotilla-eu"}}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return seen
		case <-tick.C:
		}
		start := time.Now()
		// The renewal's own deadline outlives the flood's end by design: a renewal in flight is
		// measured to its end.
		rctx, cancel := context.WithTimeout(context.WithValue(context.WithoutCancel(ctx), leaseRequest{}, true), 5*time.Second)
		_, err := client.CoordinationV1().Leases(lease.Namespace).Update(rctx, lease, metav1.UpdateOptions{})
		cancel()
		seen.done++
		if err != nil {
			seen.failed++
		}
		seen.slowest = max(seen.slowest, time.Since(start))
	}
}

// floodResult counts the answers of the kubelet API to the flood.
type floodResult struct {
	byCode sync.Map // int -> *atomic.Int64
	total  atomic.Int64
}

func (f *floodResult) add(code int) {
	v, _ := f.byCode.LoadOrStore(code, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	f.total.Add(1)
}

func (f *floodResult) String() string {
	var parts []string
	f.byCode.Range(func(k, v any) bool {
		parts = append(parts, fmt.Sprintf("%d×%d", v.(*atomic.Int64).Load(), k.(int)))
		return true
	})
	return fmt.Sprintf("%d requests (%s)", f.total.Load(), strings.Join(parts, ", "))
}

// flood sends the kubelet API as many requests as workers can, each with a bogus token of its own
// (so that no cache helps), until ctx ends.
func flood(ctx context.Context, addr string, workers int) *floodResult {
	res := &floodResult{}
	transport := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the kubelet API's self-signed certificate, on loopback
		MaxIdleConnsPerHost: workers}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/containerLogs/ns/web/app", nil)
				if err != nil {
					return
				}
				req.Header.Set("Authorization", "Bearer bogus-"+strconv.Itoa(w)+"-"+strconv.Itoa(n))
				resp, err := client.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				res.add(resp.StatusCode)
			}
		})
	}
	wg.Wait()
	return res
}

// waitListening waits, bounded, until addr accepts connections.
func waitListening(t *testing.T, addr string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kubelet API never listened on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAFloodOfBogusTokensNeverDelaysTheLeaseRenewals floods the kubelet API with bogus tokens for
// 5 s, each of its own so that no cache helps, while a client built as the manager builds the
// virtual nodes' (the manager's config: 500 QPS, burst 1000) renews a Lease. The fake API server
// serves the manager's identity floodCapacity requests a second, as API Priority and Fairness
// would give it a share, and answers 429 past that. No renewal may be throttled: none refused by
// the API server, none held by its client's rate limiter.
//
// floodWorkers callers stand for an attacker's connections. Each holds a request the kubelet API
// forwards (client-go waits out a 429's Retry-After and retries), so it takes some hundreds to
// exceed the API server's share; a handful would not.
const (
	floodCapacity = 100
	floodWorkers  = 256
)

func TestAFloodOfBogusTokensNeverDelaysTheLeaseRenewals(t *testing.T) {
	if testing.Short() {
		t.Skip("floods for 5 s")
	}
	api := newFakeAPIServer(t, floodCapacity)
	meter := &waitMeter{RateLimiter: flowcontrol.NewTokenBucketRateLimiter(500, 1000)}
	cfg := &rest.Config{Host: api.URL, QPS: 500, Burst: 1000, RateLimiter: meter}
	leases, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	port, err := testbed.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	// As cmd/flotilla-manager wires it: a client of its own, from the same config.
	kubeletClient, err := NewPrimaryClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	k := &Server{Primary: kubeletClient, Secondaries: secondariesMap{}, Nodes: virtualNodesAt(t, map[string]int32{"flotilla-eu": int32(port)}),
		Ports: PortRange{First: int32(port), Count: 1}, BindHost: "127.0.0.1", Address: "127.0.0.1", Log: logr.Discard()}

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	served := make(chan error, 1)
	go func() { served <- k.Start(ctx) }()
	waitListening(t, addr)

	floodCtx, endFlood := context.WithTimeout(ctx, 5*time.Second)
	defer endFlood()
	seen := make(chan renewals, 1)
	go func() { seen <- renewLeases(floodCtx, leases, 250*time.Millisecond) }()
	res := flood(floodCtx, addr, floodWorkers)
	got := <-seen
	stop()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("the kubelet API stopped with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the kubelet API did not stop within 10 s")
	}

	t.Logf("flood: %s; API server: %d TokenReviews, %d SubjectAccessReviews, %d pod reads, %d refused (429); "+
		"Lease renewals: %d, %d failed, %d refused, longest wait in the client's limiter %s, slowest %s",
		res, api.tokenReviews.Load(), api.sars.Load(), api.podGets.Load(), api.refused.Load(),
		got.done, got.failed, api.leasesRefused.Load(), meter.longestLeaseWait(), got.slowest)
	if got.done < 5 {
		t.Errorf("only %d Lease renewals in 5 s", got.done)
	}
	if got.failed > 0 || api.leasesRefused.Load() > 0 {
		t.Errorf("%d Lease renewals failed and %d were refused (429) during the flood, want none", got.failed, api.leasesRefused.Load())
	}
	// The wall-clock time of a renewal is only logged: on loopback, the flood's own callers share
	// the test's CPUs with the manager.
	if wait := meter.longestLeaseWait(); wait > 50*time.Millisecond {
		t.Errorf("a Lease renewal waited %s in its client's rate limiter during the flood", wait)
	}
	if api.podGets.Load() > 0 || api.sars.Load() > 0 {
		t.Errorf("bogus tokens caused %d pod reads and %d SubjectAccessReviews", api.podGets.Load(), api.sars.Load())
	}
}
