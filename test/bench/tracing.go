package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-dev/flotilla/test/testbed"
)

// TracingResult is the cost of the manager's tracing: the elected run again with a manager
// tracing every pod into the bed's Jaeger (sampling 1.0), beside the same run with a manager
// that does not, both on the same bed (whose API servers trace either way), one after the other.
type TracingResult struct {
	Untraced Result `json:"untraced"`
	Traced   Result `json:"traced"`
	// Cost is the traced run's time over the untraced one's.
	Cost       float64 `json:"cost"`
	TargetCost float64 `json:"targetCost"`
}

// measureTracing stops the managers of the main runs and runs the elected pods twice more, each
// time with one fresh manager: without tracing, then with --tracing-endpoint at the bed's Jaeger.
func (rep *Report) measureTracing(ctx context.Context, bed *testbed.Bed, stop []*benchManager, bin, dir string, o options) error {
	if bed.Jaeger == nil {
		return nil
	}
	for _, m := range stop {
		if err := m.Stop(20 * time.Second); err != nil {
			return err
		}
	}
	t := &TracingResult{TargetCost: 1.05}
	for _, traced := range []bool{false, true} {
		mo := o
		mode := "elected, the manager untraced"
		if traced {
			mo.tracingEndpoint = bed.Jaeger.OTLPEndpoint
			mode = "elected, the manager tracing (sampling 1.0)"
		}
		mdir := filepath.Join(dir, fmt.Sprintf("tracing-%t", traced))
		mgr, _, err := startManager(filepath.Join(bin, "flotilla-manager"), bed.Primary.KubeconfigPath, mdir, "", mo)
		if err != nil {
			return err
		}
		// Leader (no other replica runs) once ready, with its virtual nodes Ready.
		if err := waitReady(ctx, mgr); err != nil {
			_ = mgr.Stop(20 * time.Second)
			return mgr.diedWith(err)
		}
		if err := waitNodesReady(ctx, bed); err != nil {
			_ = mgr.Stop(20 * time.Second)
			return mgr.diedWith(err)
		}
		fmt.Printf("bench: %d pods %s...\n", rep.Pods, mode)
		var phases []string
		res, err := measure(ctx, mode, []target{{bed.Primary.Clientset, rep.Pods}}, "bench-elected", true, &phases, func() {})
		if serr := mgr.Stop(20 * time.Second); serr != nil && err == nil {
			err = serr
		}
		if err != nil {
			return mgr.diedWith(err)
		}
		if traced {
			t.Traced = res
		} else {
			t.Untraced = res
		}
	}
	if t.Untraced.TotalSeconds > 0 {
		t.Cost = round(t.Traced.TotalSeconds / t.Untraced.TotalSeconds)
	}
	rep.Tracing = t
	return nil
}

func printTracing(t *TracingResult) {
	if t == nil {
		return
	}
	fmt.Printf("tracing cost:         %.2f (target <= %.2f): %d elected pods in %.1f s traced, %.1f s untraced; p50 %.0f ms against %.0f ms; deletion %.1f s against %.1f s\n",
		t.Cost, t.TargetCost, t.Traced.Pods, t.Traced.TotalSeconds, t.Untraced.TotalSeconds, t.Traced.P50Millis, t.Untraced.P50Millis,
		t.Traced.DeleteSeconds, t.Untraced.DeleteSeconds)
}

// waitReady waits, up to a minute, for the manager's readiness (its webhook serving, its caches
// and clusters synced).
func waitReady(ctx context.Context, m *benchManager) error {
	client := &http.Client{Timeout: time.Second}
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if m.Exited() {
			return false, errors.New("the manager exited")
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.readyURL, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}
