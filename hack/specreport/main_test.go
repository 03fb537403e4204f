package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

func TestSummarize(t *testing.T) {
	spec := func(text string, d time.Duration, st types.SpecState) types.SpecReport {
		return types.SpecReport{LeafNodeType: types.NodeTypeIt, LeafNodeText: text, RunTime: d, State: st, ParallelProcess: 1,
			ContainerHierarchyTexts: []string{"outer"}, ContainerHierarchyLabels: [][]string{{"disruptive"}}}
	}
	r := types.Report{SuiteDescription: "e2e", RunTime: 100 * time.Second, SpecReports: []types.SpecReport{
		// Two processes: the first's part of the set-up takes 30 s, the second waits for it.
		{LeafNodeType: types.NodeTypeSynchronizedBeforeSuite, RunTime: 30 * time.Second, ParallelProcess: 1},
		{LeafNodeType: types.NodeTypeSynchronizedBeforeSuite, RunTime: 29 * time.Second, ParallelProcess: 2},
		spec("quick", time.Second, types.SpecStatePassed),
		spec("slow", 40*time.Second, types.SpecStatePassed),
		spec("middle", 10*time.Second, types.SpecStateFailed),
		spec("skipped", 0, types.SpecStateSkipped),
		{LeafNodeType: types.NodeTypeCleanupAfterSuite, RunTime: 5 * time.Second, ParallelProcess: 1},
	}}
	s := summarize(r, 2)
	if s.setUp != 30*time.Second || s.tearDown != 5*time.Second || s.inSpecs != 51*time.Second {
		t.Fatalf("set-up %s, tear-down %s, specs %s: want 30s, 5s, 51s", s.setUp, s.tearDown, s.inSpecs)
	}
	if len(s.slowest) != 2 || s.slowest[0].LeafNodeText != "slow" || s.slowest[1].LeafNodeText != "middle" {
		t.Fatalf("slowest: %v, want slow then middle", s.slowest)
	}
	// A focused run skips most specs: they are counted, never listed among the slowest.
	if all := summarize(r, 10).slowest; len(all) != 3 {
		t.Fatalf("slowest of all: %d specs, want the 3 that ran", len(all))
	}
	var out bytes.Buffer
	write(&out, s)
	for _, want := range []string{"suite set-up 30s, tear-down 5s, specs 51s (summed over 2 processes)", "2 passed, 1 failed, 1 skipped",
		"40s  outer slow [disruptive]", "10s  outer middle [disruptive] (failed)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
