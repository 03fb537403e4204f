package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRelayPrintsWhatGoTestPrintsWithoutV(t *testing.T) {
	in := `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestOK"}
{"Action":"output","Package":"p","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"p","Test":"TestOK","Output":"    quiet line\n"}
{"Action":"pass","Package":"p","Test":"TestOK"}
{"Action":"run","Package":"p","Test":"TestBad"}
{"Action":"output","Package":"p","Test":"TestBad","Output":"    bad_test.go:9: it broke\n"}
{"Action":"output","Package":"p","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}
{"Action":"fail","Package":"p","Test":"TestBad"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t0.01s\n"}
{"Action":"fail","Package":"p"}
{"Action":"output","Package":"q","Output":"PASS\n"}
{"Action":"output","Package":"q","Output":"ok  \tq\t0.01s\n"}
{"Action":"pass","Package":"q"}
`
	var kept, shown bytes.Buffer
	failed, err := relay(strings.NewReader(in), &kept, &shown)
	if err != nil {
		t.Fatal(err)
	}
	if !failed {
		t.Error("a failed test: relay says nothing failed")
	}
	if kept.String() != in {
		t.Errorf("kept events differ from the input:\n%s", kept.String())
	}
	want := "    bad_test.go:9: it broke\n--- FAIL: TestBad (0.00s)\nFAIL\tp\t0.01s\nok  \tq\t0.01s\n"
	if shown.String() != want {
		t.Errorf("shown:\n%s\nwant:\n%s", shown.String(), want)
	}
}

func TestRelayFailsOnABuildThatFailed(t *testing.T) {
	in := `{"ImportPath":"r [r.test]","Action":"build-output","Output":"# r\n./r.go:3:1: syntax error\n"}
{"ImportPath":"r [r.test]","Action":"build-fail"}
{"Action":"output","Package":"r","Output":"FAIL\tr [build failed]\n"}
`
	var kept, shown bytes.Buffer
	failed, err := relay(strings.NewReader(in), &kept, &shown)
	if err != nil || !failed {
		t.Fatalf("failed %v, err %v: want a failure", failed, err)
	}
	if !strings.Contains(shown.String(), "syntax error") || !strings.Contains(shown.String(), "[build failed]") {
		t.Errorf("the build's errors are not shown:\n%s", shown.String())
	}
}
