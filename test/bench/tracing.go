package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/flotilla-dev/flotilla/test/testbed"
)

// TracingResult is the cost of the manager's tracing: the elected run again with a manager
// tracing every pod into the bed's Jaeger (sampling 1.0), beside the same run with a manager
// that does not, on the same bed (whose API servers trace either way), in pairs one after the
// other: the machine's noise moves runs minutes apart more than tracing does.
type TracingResult struct {
	Untraced []Result `json:"untraced"`
	Traced   []Result `json:"traced"`
	// Cost is the median over the pairs of the traced run's time over the untraced one's.
	Cost       float64 `json:"cost"`
	TargetCost float64 `json:"targetCost"`
}

// tracingPairs are the untraced and traced runs measured.
const tracingPairs = 3

// measureTracing stops the managers of the main runs and runs the elected pods in pairs, each run
// with one fresh manager: without tracing, then with --tracing-endpoint at the bed's Jaeger.
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
	var ratios []float64
	for pair := range tracingPairs {
		for _, traced := range []bool{false, true} {
			res, err := rep.electedWith(ctx, bed, bin, filepath.Join(dir, fmt.Sprintf("tracing-%d-%t", pair, traced)), pair, traced, o)
			if err != nil {
				return err
			}
			if traced {
				t.Traced = append(t.Traced, res)
			} else {
				t.Untraced = append(t.Untraced, res)
			}
		}
		if u := t.Untraced[pair].TotalSeconds; u > 0 {
			ratios = append(ratios, t.Traced[pair].TotalSeconds/u)
		}
	}
	slices.Sort(ratios)
	if len(ratios) > 0 {
		t.Cost = round(ratios[len(ratios)/2])
	}
	rep.Tracing = t
	return nil
}

// electedWith is one elected run with a fresh manager, tracing or not.
func (rep *Report) electedWith(ctx context.Context, bed *testbed.Bed, bin, dir string, pair int, traced bool, o options) (Result, error) {
	mode := "elected, the manager untraced"
	if traced {
		o.tracingEndpoint = bed.Jaeger.OTLPEndpoint
		mode = "elected, the manager tracing (sampling 1.0)"
	}
	mgr, _, err := startManager(filepath.Join(bin, "flotilla-manager"), bed.Primary.KubeconfigPath, dir, "", o)
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = mgr.Stop(20 * time.Second) }()
	// Leader (no other replica runs) once ready, with its virtual nodes Ready.
	if err := waitReady(ctx, mgr); err != nil {
		return Result{}, mgr.diedWith(err)
	}
	if err := waitNodesReady(ctx, bed); err != nil {
		return Result{}, mgr.diedWith(err)
	}
	fmt.Printf("bench: %d pods %s (pair %d of %d)...\n", rep.Pods, mode, pair+1, tracingPairs)
	var phases []string
	res, err := measure(ctx, mode, []target{{bed.Primary.Clientset, rep.Pods}}, fmt.Sprintf("bench-elected-%d-traced-%t", pair, traced), true, &phases, func() {})
	if err != nil {
		return Result{}, mgr.diedWith(err)
	}
	return res, nil
}

func printTracing(t *TracingResult) {
	if t == nil {
		return
	}
	fmt.Printf("tracing cost:         %.2f (target <= %.2f), the median of %d pairs of runs of %d elected pods:\n", t.Cost, t.TargetCost, len(t.Traced), t.Traced[0].Pods)
	for i := range t.Traced {
		fmt.Printf("  pair %d: %.1f s traced, %.1f s untraced (%.2f); p50 %.0f ms against %.0f ms; deletion %.1f s against %.1f s\n", i+1,
			t.Traced[i].TotalSeconds, t.Untraced[i].TotalSeconds, t.Traced[i].TotalSeconds/max(t.Untraced[i].TotalSeconds, 0.001),
			t.Traced[i].P50Millis, t.Untraced[i].P50Millis, t.Traced[i].DeleteSeconds, t.Untraced[i].DeleteSeconds)
	}
}

// waitReady waits, up to a minute, for the manager's readiness (its webhook serving, its caches
// and clusters synced).
func waitReady(ctx context.Context, m *benchManager) error {
	return testbed.WaitHTTPOK(ctx, m.readyURL, time.Minute, func() bool { return !m.Exited() })
}
