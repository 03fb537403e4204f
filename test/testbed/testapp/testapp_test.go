package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is written by the server's goroutines and read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestRunScript(t *testing.T) {
	t.Setenv("GREETING", "hello")
	tests := map[string]struct {
		script   string
		wantOut  string
		wantCode int
	}{
		"echo":                    {script: `echo "a  b" c`, wantOut: "a  b c\n"},
		"echo -n":                 {script: `echo -n x`, wantOut: "x"},
		"list":                    {script: `echo one; echo two`, wantOut: "one\ntwo\n"},
		"and stops on failure":    {script: `false && echo no; echo yes`, wantOut: "yes\n"},
		"or runs on failure":      {script: `false || echo fallback`, wantOut: "fallback\n"},
		"exit code":               {script: `echo bye; exit 3; echo never`, wantOut: "bye\n", wantCode: 3},
		"last command's code":     {script: `true; false`, wantCode: 1},
		"variables":               {script: `echo $GREETING ${GREETING}! '$GREETING'`, wantOut: "hello hello! $GREETING\n"},
		"quoted separators":       {script: `echo "a;b && c"`, wantOut: "a;b && c\n"},
		"unknown command":         {script: `nosuch`, wantCode: 127},
		"sleep a fraction":        {script: `sleep 0.01 && echo slept`, wantOut: "slept\n"},
		"unterminated quote":      {script: `echo "oops`, wantCode: 2},
		"printenv missing var":    {script: `printenv NOT_SET_ANYWHERE`, wantCode: 1},
		"printenv set var":        {script: `printenv GREETING`, wantOut: "hello\n"},
		"a newline separates too": {script: "echo a\necho b", wantOut: "a\nb\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out, errs bytes.Buffer
			code := runScript(tc.script, &out, &errs)
			if code != tc.wantCode || out.String() != tc.wantOut {
				t.Errorf("code %d out %q (stderr %q), want %d %q", code, out.String(), errs.String(), tc.wantCode, tc.wantOut)
			}
		})
	}
}

func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServerAnswersWhoItIsLogsAndFlipsReadiness(t *testing.T) {
	t.Setenv("POD_NAME", "web-1")
	t.Setenv("NODE_NAME", "secondary1-real")
	var log lockedBuffer
	s := newServer(&log)
	srv := httptest.NewServer(s.handler())
	defer srv.Close()

	if code, body := get(t, srv, "/"); code != http.StatusOK || !strings.Contains(body, "pod=web-1") || !strings.Contains(body, "node=secondary1-real") {
		t.Errorf("/ = %d %q", code, body)
	}
	if code, _ := get(t, srv, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz at start = %d", code)
	}
	get(t, srv, "/ready/off")
	if code, _ := get(t, srv, "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz after off = %d", code)
	}
	get(t, srv, "/ready/on")
	if code, _ := get(t, srv, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after on = %d", code)
	}
	get(t, srv, "/exit?code=7")
	select {
	case code := <-s.exit:
		if code != 7 {
			t.Errorf("exit code %d, want 7", code)
		}
	default:
		t.Error("/exit asked for no exit")
	}
	if !strings.Contains(log.String(), "request GET /readyz") {
		t.Errorf("requests not logged:\n%s", log.String())
	}
}

func TestWgetFetchesAndFailsOnAnErrorStatus(t *testing.T) {
	var log lockedBuffer
	srv := httptest.NewServer(newServer(&log).handler())
	defer srv.Close()
	var out, errs bytes.Buffer
	if code := runScript("wget -qO- "+srv.URL+"/readyz", &out, &errs); code != 0 || out.String() != "ready\n" {
		t.Errorf("wget /readyz: code %d out %q err %q", code, out.String(), errs.String())
	}
	out.Reset()
	runScript("wget -qO- "+srv.URL+"/ready/off", &out, &errs)
	if code := runScript("wget -q -O - "+srv.URL+"/readyz", &out, &errs); code != 1 {
		t.Errorf("wget of a 503: code %d, want 1", code)
	}
}

func TestInteractiveShellRunsEachLineUntilExit(t *testing.T) {
	var out, errs bytes.Buffer
	code := interactive(strings.NewReader("echo one\nfalse || echo two\nexit 4\necho never\n"), &out, &errs, false)
	if code != 4 {
		t.Errorf("exit code %d, want 4", code)
	}
	if out.String() != "one\ntwo\n" {
		t.Errorf("output %q, want the two lines before exit", out.String())
	}
	out.Reset()
	if code := interactive(strings.NewReader("echo a\n"), &out, &errs, true); code != 0 || out.String() != "$ a\n$ " {
		t.Errorf("with a terminal: code %d, output %q; want a prompt before each line and at the end", code, out.String())
	}
}

// The peers' scripts as written: Admiralty's follow Job runs
// `[ $MY_CONFIG = foo ] && [ $MY_SECRET = bar ]`, its exec check `ls | grep bin`.
func TestPeersScriptsRunAsWritten(t *testing.T) {
	t.Setenv("MY_CONFIG", "foo")
	t.Setenv("MY_SECRET", "bar")
	var out, errs bytes.Buffer
	if code := runScript("[ $MY_CONFIG = foo ] && [ $MY_SECRET = bar ]", &out, &errs); code != 0 {
		t.Errorf("follow's check: exit %d (%s)", code, errs.String())
	}
	if code := runScript("[ $MY_CONFIG = bar ]", &out, &errs); code != 1 {
		t.Errorf("a false test: exit %d, want 1", code)
	}
	for _, tc := range []struct {
		args []string
		want int
	}{{[]string{"-n", ""}, 1}, {[]string{"-z", ""}, 0}, {[]string{"!", "a", "=", "a"}, 1}, {[]string{"-d", t.TempDir()}, 0}, {[]string{"a", "-lt", "b"}, 2}} {
		if got := test(tc.args, &errs); got != tc.want {
			t.Errorf("test %v = %d, want %d", tc.args, got, tc.want)
		}
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := ls([]string{dir}, &out, &errs); code != 0 || out.String() != "bin\n" {
		t.Errorf("ls %s: exit %d, %q", dir, code, out.String())
	}
}

func TestRedirectionsCommentsAndScriptFiles(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	var out, errs bytes.Buffer
	script := "# a comment line\necho hello > " + f + " # and one after a command\necho again >>" + f + "; echo 'a > b' \"#not\"; echo x#y"
	if code := runScript(script, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	if got, _ := os.ReadFile(f); string(got) != "hello\nagain\n" {
		t.Errorf("file holds %q, want the redirected and the appended line", got)
	}
	if out.String() != "a > b #not\nx#y\n" {
		t.Errorf("stdout %q: quoted > and # mid-word are not special", out.String())
	}
	for _, bad := range []string{"echo >", "echo > > f"} {
		if code := runScript(bad, &out, &errs); code != 2 {
			t.Errorf("%q: exit %d, want 2", bad, code)
		}
	}
	// sh FILE, as the volume helper pods run their setup script, with $VOL_DIR from the environment.
	vol := filepath.Join(dir, "volumes", "pvc-1")
	t.Setenv("VOL_DIR", vol)
	setup := filepath.Join(dir, "setup")
	if err := os.WriteFile(setup, []byte("#!/bin/sh\nmkdir -m 0777 -p \"$VOL_DIR\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := runFile(setup, &out, &errs); code != 0 {
		t.Fatalf("sh %s: exit %d: %s", setup, code, errs.String())
	}
	if info, err := os.Stat(vol); err != nil || info.Mode().Perm() != 0o777 {
		t.Fatalf("%s after setup: %v %v", vol, info, err)
	}
	if code := runFile(filepath.Join(dir, "missing"), &out, &errs); code != 127 {
		t.Errorf("sh of a missing file: exit %d, want 127", code)
	}
}

func TestMkdirRmChmod(t *testing.T) {
	dir := t.TempDir()
	run := func(script string) int {
		var out, errs bytes.Buffer
		return runScript(script, &out, &errs)
	}
	deep := filepath.Join(dir, "a", "b")
	if code := run("mkdir " + deep); code != 1 {
		t.Errorf("mkdir without -p under a missing parent: exit %d, want 1", code)
	}
	if code := run("mkdir -m 0705 -p " + deep); code != 0 {
		t.Fatalf("mkdir -m 0705 -p: exit %d", code)
	}
	if info, err := os.Stat(deep); err != nil || info.Mode().Perm() != 0o705 {
		t.Fatalf("%s: %v %v, want mode 0705", deep, info, err)
	}
	if code := run("mkdir -p " + deep); code != 0 {
		t.Errorf("mkdir -p of an existing dir: exit %d", code)
	}
	if info, _ := os.Stat(deep); info.Mode().Perm() != 0o705 {
		t.Errorf("mkdir -p changed an existing dir's mode to %v", info.Mode().Perm())
	}
	if code := run("mkdir " + deep); code != 1 {
		t.Errorf("mkdir of an existing dir: exit %d, want 1", code)
	}
	if code := run("mkdir -m 999 " + filepath.Join(dir, "c")); code != 2 {
		t.Errorf("mkdir with a bad mode: exit %d, want 2", code)
	}
	if code := run("echo x > " + filepath.Join(deep, "f") + " && chmod 600 " + filepath.Join(deep, "f")); code != 0 {
		t.Fatalf("chmod: exit %d", code)
	}
	if info, _ := os.Stat(filepath.Join(deep, "f")); info.Mode().Perm() != 0o600 {
		t.Errorf("chmod 600 left %v", info.Mode().Perm())
	}
	if code := run("chmod u+x " + deep); code != 2 {
		t.Errorf("chmod with a symbolic mode: exit %d, want 2", code)
	}
	top := filepath.Join(dir, "a")
	if code := run("rm " + top); code != 1 {
		t.Errorf("rm of a directory without -r: exit %d, want 1", code)
	}
	if code := run("rm " + filepath.Join(dir, "missing")); code != 1 {
		t.Errorf("rm of a missing file: exit %d, want 1", code)
	}
	if code := run("rm -f " + filepath.Join(dir, "missing")); code != 0 {
		t.Errorf("rm -f of a missing file: exit %d, want 0", code)
	}
	if code := run(`rm -rf "" /`); code != 1 {
		t.Errorf(`rm -rf "" /: exit %d, want 1 (refused)`, code)
	}
	if code := run("rm -r -f " + top); code != 0 {
		t.Fatalf("rm -r -f: exit %d", code)
	}
	if _, err := os.Stat(top); !os.IsNotExist(err) {
		t.Errorf("%s still there after rm -rf: %v", top, err)
	}
}

func TestNslookupArgs(t *testing.T) {
	tests := map[string]struct {
		args    []string
		want    nslookupQuery
		wantErr string
	}{
		"a name alone asks A and AAAA": {args: []string{"kubernetes.default"}, want: nslookupQuery{name: "kubernetes.default"}},
		"-type=A":                      {args: []string{"-type=A", "web"}, want: nslookupQuery{qtype: "A", name: "web"}},
		"-type after the name":         {args: []string{"web.", "-type=aaaa"}, want: nslookupQuery{qtype: "AAAA", name: "web."}},
		"BIND's -query and -q":         {args: []string{"-query=srv", "-q=SRV", "hello.ns.svc.clusterset.local"}, want: nslookupQuery{qtype: "SRV", name: "hello.ns.svc.clusterset.local"}},
		"no name":                      {args: []string{"-type=A"}, wantErr: "want a NAME"},
		"nothing":                      {wantErr: "want a NAME"},
		"a server argument":            {args: []string{"web", "10.0.0.10"}, wantErr: "SERVER argument is not supported"},
		"an unknown type":              {args: []string{"-type=MX", "web"}, wantErr: `unknown query type "MX"`},
		"an unknown option":            {args: []string{"-debug", "web"}, wantErr: "unknown option -debug"},
		"-type without a value":        {args: []string{"-type", "web"}, wantErr: "unknown option -type"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseNslookupArgs(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseNslookupArgs(%q) = %+v, %v; want an error with %q", tc.args, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseNslookupArgs(%q) = %+v, %v; want %+v", tc.args, got, err, tc.want)
			}
		})
	}
	var out, errs bytes.Buffer
	if code := nslookup([]string{"-type=TXT", "web"}, &out, &errs); code != 2 || !strings.Contains(errs.String(), "usage: nslookup") {
		t.Errorf("nslookup with a bad type: code %d, stderr %q", code, errs.String())
	}
}

func TestNslookupPrintsAStableAnswer(t *testing.T) {
	ips := []net.IP{net.ParseIP("fd00::1"), net.ParseIP("10.0.0.20"), net.ParseIP("10.0.0.3"), net.ParseIP("10.0.0.3")}
	if got, want := strings.Join(formatAddresses(ips), "\n"), "Address: 10.0.0.3\nAddress: 10.0.0.20\nAddress: fd00::1"; got != want {
		t.Errorf("formatAddresses = %q, want %q", got, want)
	}
	srvs := []*net.SRV{
		{Target: "b.ns.svc.cluster.local.", Port: 80, Priority: 0, Weight: 50},
		{Target: "a.ns.svc.cluster.local.", Port: 80, Priority: 0, Weight: 50},
		{Target: "c.ns.svc.cluster.local.", Port: 42, Priority: 0, Weight: 10},
	}
	want := "web.ns.svc.cluster.local service = 0 10 42 c.ns.svc.cluster.local.\n" +
		"web.ns.svc.cluster.local service = 0 50 80 a.ns.svc.cluster.local.\n" +
		"web.ns.svc.cluster.local service = 0 50 80 b.ns.svc.cluster.local."
	if got := strings.Join(formatSRV("web.ns.svc.cluster.local.", srvs), "\n"); got != want {
		t.Errorf("formatSRV =\n%s\nwant\n%s", got, want)
	}
	failures := map[string]struct {
		err  error
		want string
	}{
		"no such name": {&net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}, "** server can't find x: NXDOMAIN"},
		"no answer":    {nil, "** server can't find x: NXDOMAIN"},
		"timeout":      {&net.DNSError{Err: "i/o timeout", Name: "x", IsTimeout: true}, ";; connection timed out; no servers could be reached"},
		"servfail":     {&net.DNSError{Err: "server misbehaving", Name: "x", IsTemporary: true}, "** server can't find x: server misbehaving"},
	}
	for name, tc := range failures {
		if got := nslookupFailure("x", tc.err); got != tc.want {
			t.Errorf("%s: nslookupFailure = %q, want %q", name, got, tc.want)
		}
	}
}
