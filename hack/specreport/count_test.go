package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/onsi/ginkgo/v2/types"
)

func TestCountAddsGinkgoReportsAndGoTestEvents(t *testing.T) {
	dir := t.TempDir()
	it := func(st types.SpecState) types.SpecReport {
		return types.SpecReport{LeafNodeType: types.NodeTypeIt, State: st}
	}
	reports, err := json.Marshal([]types.Report{{SpecReports: []types.SpecReport{
		{LeafNodeType: types.NodeTypeSynchronizedBeforeSuite, State: types.SpecStatePassed}, // not a spec
		it(types.SpecStatePassed), it(types.SpecStatePassed), it(types.SpecStateTimedout), it(types.SpecStatePending), it(types.SpecStateSkipped),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	ginkgo := filepath.Join(dir, "e2e-report.json")
	events := filepath.Join(dir, "unit.json")
	if err := os.WriteFile(ginkgo, reports, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(events, []byte(`{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA/sub"}
{"Action":"skip","Package":"p","Test":"TestB"}
{"Action":"fail","Package":"p","Test":"TestC"}
{"Action":"fail","Package":"p"}
# q [q.test]
{"ImportPath":"q [q.test]","Action":"build-fail"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var tl tally
	for _, f := range []string{ginkgo, events, filepath.Join(dir, "never-written.json")} {
		if err := tl.addFile(f); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := tl.String(), "tests: 4 passed, 3 failed, 3 skipped"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}
