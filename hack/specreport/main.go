// Command specreport reads the JSON report a Ginkgo suite wrote (ginkgo --json-report) and prints
// where its time went: the suite's whole run, the time in suite set-up and tear-down
// (BeforeSuite, SynchronizedBeforeSuite, AfterSuite and the cleanups they registered), the time
// spent in specs, and the slowest specs with their full text, labels and state. `make e2e` runs it
// after every run, passed or failed, so that a slow spec is seen the day it becomes slow.
//
// With -count it adds up the tests of several runs instead, Ginkgo JSON reports and the events of
// `go test -json` (as hack/testlog keeps them) alike, and prints one line, "tests: N passed,
// N failed, N skipped": `make test` closes with it. A file that is missing (its step did not run)
// adds nothing.
//
// Usage:
//
//	go run ./hack/specreport [-top 20] REPORT.json
//	go run ./hack/specreport -count FILE...
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

func main() {
	top := flag.Int("top", 20, "how many of the slowest specs to print")
	count := flag.Bool("count", false, "add up the tests of every FILE (Ginkgo JSON reports, go test -json events) in one line")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: specreport [-top N] REPORT.json\n       specreport -count FILE...\n\n"+
			"Prints a Ginkgo JSON report's run time, its suite set-up and tear-down time, and its N slowest specs;\n"+
			"with -count, the tests passed, failed and skipped in all the FILEs.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *count {
		var t tally
		for _, f := range flag.Args() {
			if err := t.addFile(f); err != nil {
				fmt.Fprintf(os.Stderr, "specreport: %v\n", err)
				os.Exit(1)
			}
		}
		fmt.Println(t)
		return
	}
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	raw, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		fmt.Fprintf(os.Stderr, "specreport: %v\n", err)
		os.Exit(1)
	}
	var reports []types.Report
	if err := json.Unmarshal(raw, &reports); err != nil {
		fmt.Fprintf(os.Stderr, "specreport: %s is not a Ginkgo JSON report: %v\n", flag.Arg(0), err)
		os.Exit(1)
	}
	for _, r := range reports {
		write(os.Stdout, summarize(r, *top))
	}
}

// summary is what one suite's report says about where its time went. With parallel processes
// each runs the suite's set-up nodes side by side (the first process's part of a
// SynchronizedBeforeSuite while the others wait for it): set-up and tear-down are the longest
// process's, and the time in specs is summed over the processes.
type summary struct {
	suite     string
	runTime   time.Duration
	setUp     time.Duration // BeforeSuite and SynchronizedBeforeSuite
	tearDown  time.Duration // AfterSuite, SynchronizedAfterSuite and the suite's cleanups
	inSpecs   time.Duration
	processes int
	counts    map[types.SpecState]int
	slowest   []types.SpecReport
}

// suiteSetUp and suiteTearDown are the node types whose time is the suite's own, not a spec's.
var (
	suiteSetUp    = types.NodeTypeBeforeSuite | types.NodeTypeSynchronizedBeforeSuite
	suiteTearDown = types.NodeTypeAfterSuite | types.NodeTypeSynchronizedAfterSuite | types.NodeTypeCleanupAfterSuite
)

func summarize(r types.Report, top int) summary {
	s := summary{suite: r.SuiteDescription, runTime: r.RunTime, counts: map[types.SpecState]int{}}
	var specs []types.SpecReport
	setUp, tearDown := map[int]time.Duration{}, map[int]time.Duration{}
	processes := map[int]bool{}
	for _, sr := range r.SpecReports {
		processes[max(sr.ParallelProcess, 1)] = true
		switch {
		case sr.LeafNodeType.Is(suiteSetUp):
			setUp[sr.ParallelProcess] += sr.RunTime
		case sr.LeafNodeType.Is(suiteTearDown):
			tearDown[sr.ParallelProcess] += sr.RunTime
		case sr.LeafNodeType.Is(types.NodeTypeIt):
			s.counts[sr.State]++
			s.inSpecs += sr.RunTime
			// A spec that did not run (a focused run skips the rest) is not among the slowest.
			if !sr.State.Is(types.SpecStateSkipped | types.SpecStatePending) {
				specs = append(specs, sr)
			}
		}
	}
	for _, d := range setUp {
		s.setUp = max(s.setUp, d)
	}
	for _, d := range tearDown {
		s.tearDown = max(s.tearDown, d)
	}
	s.processes = len(processes)
	slices.SortStableFunc(specs, func(a, b types.SpecReport) int { return int(b.RunTime - a.RunTime) })
	s.slowest = specs[:min(top, len(specs))]
	return s
}

func write(w io.Writer, s summary) {
	fmt.Fprintf(w, "%s: %s in all; suite set-up %s, tear-down %s, specs %s (summed over %d processes)\n", s.suite,
		round(s.runTime), round(s.setUp), round(s.tearDown), round(s.inSpecs), s.processes)
	// Passed and failed are always said, 0 included: a reader of the log looks for that pair.
	states := []string{fmt.Sprintf("%d passed", s.counts[types.SpecStatePassed]), fmt.Sprintf("%d failed", s.counts[types.SpecStateFailed])}
	for _, st := range []types.SpecState{types.SpecStateSkipped,
		types.SpecStatePending, types.SpecStatePanicked, types.SpecStateInterrupted, types.SpecStateAborted, types.SpecStateTimedout} {
		if n := s.counts[st]; n > 0 {
			states = append(states, fmt.Sprintf("%d %s", n, st))
		}
	}
	fmt.Fprintf(w, "specs: %s\n", strings.Join(states, ", "))
	fmt.Fprintf(w, "the %d slowest specs:\n", len(s.slowest))
	for _, sr := range s.slowest {
		labels := ""
		if l := sr.Labels(); len(l) > 0 {
			labels = " [" + strings.Join(l, ", ") + "]"
		}
		state := ""
		if sr.State != types.SpecStatePassed {
			state = " (" + sr.State.String() + ")"
		}
		fmt.Fprintf(w, "  %7s  %s%s%s\n", round(sr.RunTime), sr.FullText(), labels, state)
	}
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
