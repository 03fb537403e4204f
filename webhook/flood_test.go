package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// floodAPIServer answers a claim read with 404 and a Lease update with the Lease, counting both.
type floodAPIServer struct {
	claimReads, leaseRenewals atomic.Int64
}

func (f *floodAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.Contains(r.URL.Path, "/persistentvolumeclaims/"):
		f.claimReads.Add(1)
		w.WriteHeader(http.StatusNotFound)
		_, _ = fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	case strings.Contains(r.URL.Path, "/leases/") && r.Method == http.MethodPut:
		f.leaseRenewals.Add(1)
		_, _ = fmt.Fprint(w, `{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"flotilla","namespace":"flotilla-system","resourceVersion":"1"}}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}
}

// A flood of admissions naming claims the cache has not seen reads the API server no faster than
// the webhook's own limiter allows, and the manager's Lease renewals, on a client of their own,
// are neither delayed nor refused meanwhile.
func TestAFloodOfUnseenClaimsNeverDelaysTheLeaseRenewals(t *testing.T) {
	if testing.Short() {
		t.Skip("floods for 3 s")
	}
	api := &floodAPIServer{}
	srv := httptest.NewServer(api)
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, QPS: 20, Burst: 40}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"), meta.RESTScopeNamespace)
	live, err := client.New(cfg, client.Options{Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const perSecond, burst = 10, 20
	h := &Handler{Claims: &countingReader{}, LiveClaims: live, LiveReads: rate.NewLimiter(perSecond, burst)}

	ctx, stop := context.WithTimeout(t.Context(), 3*time.Second)
	defer stop()
	var wg sync.WaitGroup
	var refused, other atomic.Int64
	for w := range 50 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				names := make([]string, 50)
				for j := range names {
					names[j] = fmt.Sprintf("w%d-%d-%d", w, i, j)
				}
				_, err := h.claimViews(ctx, podWithClaims(names...))
				switch {
				case errors.Is(err, errLiveReads):
					refused.Add(1)
				case err != nil && ctx.Err() == nil:
					other.Add(1)
					t.Errorf("an admission failed otherwise: %v", err)
				}
				// The API server calls again at once; a pause keeps the test's own CPU modest.
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	var slowest time.Duration
	renewed, failed := 0, 0
	for ctx.Err() == nil {
		start := time.Now()
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "flotilla-system", Name: "flotilla", ResourceVersion: "1"}}
		if _, err := leases.CoordinationV1().Leases("flotilla-system").Update(context.WithoutCancel(ctx), lease, metav1.UpdateOptions{}); err != nil {
			failed++
		} else {
			renewed++
		}
		slowest = max(slowest, time.Since(start))
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
	wg.Wait()
	reads := api.claimReads.Load()
	t.Logf("flood: %d admissions refused (429), %d claim reads live; Lease renewals: %d, %d failed, slowest %s", refused.Load(), reads, renewed, failed, slowest)
	if limit := int64(burst + 4*perSecond); reads > limit {
		t.Errorf("%d live claim reads in 3 s, want at most %d (the limiter's burst and rate)", reads, limit)
	}
	if refused.Load() == 0 {
		t.Error("no admission was refused: the flood did not reach the limiter")
	}
	if failed > 0 || renewed < 5 {
		t.Errorf("Lease renewals: %d done, %d failed, want every one through", renewed, failed)
	}
	if slowest > 500*time.Millisecond {
		t.Errorf("a Lease renewal took %s during the flood", slowest)
	}
}
