package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	// UntracedCPU and TracedCPU are where each run's CPU went, pair by pair: what tracing adds
	// is the manager's spans and Jaeger taking them in, on the same cores as the API servers.
	UntracedCPU []RunCPU `json:"untracedCPU"`
	TracedCPU   []RunCPU `json:"tracedCPU"`
}

// RunCPU is the CPU time of one run (its pods' creation and deletion) spent by the manager and
// by Jaeger, and the machine's idle time over it (every core's).
type RunCPU struct {
	ManagerSeconds float64 `json:"managerSeconds"`
	JaegerSeconds  float64 `json:"jaegerSeconds"`
	IdleSeconds    float64 `json:"idleSeconds"`
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
			res, cpu, err := rep.electedWith(ctx, bed, bin, filepath.Join(dir, fmt.Sprintf("tracing-%d-%t", pair, traced)), pair, traced, o)
			if err != nil {
				return err
			}
			if traced {
				t.Traced, t.TracedCPU = append(t.Traced, res), append(t.TracedCPU, cpu)
			} else {
				t.Untraced, t.UntracedCPU = append(t.Untraced, res), append(t.UntracedCPU, cpu)
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

// electedWith is one elected run with a fresh manager, tracing or not, and where its CPU went.
func (rep *Report) electedWith(ctx context.Context, bed *testbed.Bed, bin, dir string, pair int, traced bool, o options) (Result, RunCPU, error) {
	mode := "elected, the manager untraced"
	if traced {
		o.tracingEndpoint = bed.Jaeger.OTLPEndpoint
		mode = "elected, the manager tracing (sampling 1.0)"
	}
	mgr, _, err := startManager(filepath.Join(bin, "flotilla-manager"), bed.Primary.KubeconfigPath, dir, "", o)
	if err != nil {
		return Result{}, RunCPU{}, err
	}
	defer func() { _ = mgr.Stop(20 * time.Second) }()
	// Leader (no other replica runs) once ready, with its virtual nodes Ready.
	if err := waitReady(ctx, mgr); err != nil {
		return Result{}, RunCPU{}, mgr.diedWith(err)
	}
	if err := waitNodesReady(ctx, bed); err != nil {
		return Result{}, RunCPU{}, mgr.diedWith(err)
	}
	fmt.Printf("bench: %d pods %s (pair %d of %d)...\n", rep.Pods, mode, pair+1, tracingPairs)
	var phases []string
	manager, jaeger, idle := procCPUSeconds(mgr.PID()), procCPUSeconds(bed.Jaeger.PID), machineIdleSeconds()
	res, err := measure(ctx, mode, []target{{bed.Primary.Clientset, rep.Pods}}, fmt.Sprintf("bench-elected-%d-traced-%t", pair, traced), true, &phases, func() {})
	if err != nil {
		return Result{}, RunCPU{}, mgr.diedWith(err)
	}
	cpu := RunCPU{ManagerSeconds: round(procCPUSeconds(mgr.PID()) - manager), JaegerSeconds: round(procCPUSeconds(bed.Jaeger.PID) - jaeger),
		IdleSeconds: round(machineIdleSeconds() - idle)}
	return res, cpu, nil
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
		if i < len(t.TracedCPU) && i < len(t.UntracedCPU) {
			tc, uc := t.TracedCPU[i], t.UntracedCPU[i]
			fmt.Printf("          CPU: manager %.1f s against %.1f s, Jaeger %.1f s against %.1f s; the machine idle %.1f s against %.1f s\n",
				tc.ManagerSeconds, uc.ManagerSeconds, tc.JaegerSeconds, uc.JaegerSeconds, tc.IdleSeconds, uc.IdleSeconds)
		}
	}
}

// waitReady waits, up to a minute, for the manager's readiness (its webhook serving, its caches
// and clusters synced).
func waitReady(ctx context.Context, m *benchManager) error {
	return testbed.WaitHTTPOK(ctx, m.readyURL, time.Minute, func() bool { return !m.Exited() })
}

// machineIdleSeconds is the time every core of the machine spent idle (or waiting on I/O) so
// far, from /proc/stat's cpu line, in clock ticks (USER_HZ, 100 on Linux).
func machineIdleSeconds() float64 {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0
	}
	idle, _ := strconv.ParseFloat(f[4], 64)
	iowait, _ := strconv.ParseFloat(f[5], 64)
	return (idle + iowait) / 100
}
