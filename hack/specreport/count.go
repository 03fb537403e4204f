package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/onsi/ginkgo/v2/types"
)

// tally is the tests of several runs added up.
type tally struct{ passed, failed, skipped int }

func (t tally) String() string {
	return fmt.Sprintf("tests: %d passed, %d failed, %d skipped", t.passed, t.failed, t.skipped)
}

// addFile adds the tests of one file: a Ginkgo JSON report (an array of suite reports) or the
// events `go test -json` wrote (an object a line). A missing file adds nothing.
func (t *tally) addFile(name string) error {
	raw, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	if raw[0] == '[' {
		var reports []types.Report
		if err := json.Unmarshal(raw, &reports); err != nil {
			return fmt.Errorf("%s is not a Ginkgo JSON report: %w", name, err)
		}
		for _, r := range reports {
			t.addGinkgo(r)
		}
		return nil
	}
	if err := t.addGoTest(raw); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// addGinkgo counts a suite's specs: an interrupted, aborted, panicked or timed-out spec failed; a
// pending one was skipped.
func (t *tally) addGinkgo(r types.Report) {
	for _, sr := range r.SpecReports {
		if !sr.LeafNodeType.Is(types.NodeTypeIt) {
			continue
		}
		switch {
		case sr.State.Is(types.SpecStatePassed):
			t.passed++
		case sr.State.Is(types.SpecStateSkipped | types.SpecStatePending):
			t.skipped++
		default:
			t.failed++
		}
	}
}

// addGoTest counts the tests (subtests included) `go test -json` said passed, failed or skipped;
// a package whose build failed counts as one failure.
func (t *tally) addGoTest(raw []byte) error {
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var e struct{ Action, Test string }
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue // go test writes some errors as plain text
		}
		switch {
		case e.Action == "build-fail":
			t.failed++
		case e.Test == "":
		case e.Action == "pass":
			t.passed++
		case e.Action == "fail":
			t.failed++
		case e.Action == "skip":
			t.skipped++
		}
	}
	return sc.Err()
}
