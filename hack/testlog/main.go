// Command testlog reads `go test -json` on standard input and prints what `go test` prints
// without -v: each package's closing line, the whole output of a test that failed, and a build's
// errors. It keeps every event in a file, which `specreport -count` adds to the run's tally, and
// exits 1 when a test or a build failed, so a pipe through it fails as `go test` would.
//
// Usage:
//
//	go test -json ./... | go run ./hack/testlog EVENTS.json
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// event is the part of a `go test -json` event (cmd/test2json) this command reads.
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail events name the package being built
	Test       string
	Output     string
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go test -json PACKAGES | testlog EVENTS.json")
		os.Exit(2)
	}
	out, err := os.Create(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "testlog: %v\n", err)
		os.Exit(2)
	}
	failed, err := relay(os.Stdin, out, os.Stdout)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testlog: %v\n", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// relay copies the events from in to keep and writes to w what `go test` without -v would have
// printed. It reports whether a test or a build failed.
func relay(in io.Reader, keep, w io.Writer) (failed bool, err error) {
	// A test's output is held until its end: printed if it failed, dropped if it passed.
	held := map[[2]string][]string{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		if _, err := fmt.Fprintf(keep, "%s\n", line); err != nil {
			return failed, err
		}
		var e event
		if json.Unmarshal(line, &e) != nil {
			// Not an event (go test writes some errors as plain text): shown as it is.
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		key := [2]string{e.Package, e.Test}
		switch {
		case e.Action == "build-output":
			fmt.Fprint(w, e.Output)
		case e.Action == "build-fail":
			failed = true
		case e.Test == "" && e.Action == "output":
			// The package's own lines: its closing ok/FAIL line, "no test files", a panic outside a
			// test; not the test binary's PASS, which go test without -v leaves out.
			if e.Output != "PASS\n" {
				fmt.Fprint(w, e.Output)
			}
		case e.Test == "" && e.Action == "fail":
			failed = true
		case e.Action == "output":
			held[key] = append(held[key], e.Output)
		case e.Action == "fail":
			failed = true
			for _, o := range held[key] {
				fmt.Fprint(w, o)
			}
			delete(held, key)
		case e.Action == "pass" || e.Action == "skip":
			delete(held, key)
		}
	}
	return failed, sc.Err()
}
