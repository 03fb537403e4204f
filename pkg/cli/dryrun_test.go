package cli

import (
	"bytes"
	"strings"
	"testing"
)

// Every --dry-run takes kubectl's shape; the commands that plan from what they read refuse
// server, before they read anything, saying what to use.
func TestDryRunServerIsRefusedWhereNothingWouldBeChecked(t *testing.T) {
	for _, args := range [][]string{
		{"cluster", "drain", "eu", "--dry-run=server"},
		{"rebalance", "--dry-run=server"},
		{"cluster", "replace", "eu", "--with", "us", "--dry-run=server"},
		{"cluster", "remove", "eu", "--dry-run=server"},
	} {
		var out, errOut bytes.Buffer
		root := NewRootCommand(&out, &errOut)
		root.SetArgs(append([]string{"--kubeconfig", "/nonexistent"}, args...))
		err := root.ExecuteContext(t.Context())
		if err == nil || !strings.Contains(err.Error(), "--dry-run=server") || !strings.Contains(err.Error(), "use --dry-run=client") {
			t.Errorf("%v: error %v, want the refusal of server naming client", args, err)
		}
	}
	var out, errOut bytes.Buffer
	root := NewRootCommand(&out, &errOut)
	root.SetArgs([]string{"--kubeconfig", "/nonexistent", "cluster", "drain", "eu", "--dry-run=maybe"})
	if err := root.ExecuteContext(t.Context()); err == nil || !strings.Contains(err.Error(), "want none, client or server") {
		t.Errorf("--dry-run=maybe: error %v", err)
	}
}

// -o prints the plan of a dry run: without --dry-run (a real drain, rebalance, replace or remove)
// it is refused before anything is read, saying so; a format other than json and yaml is refused
// naming those.
func TestOutputIsRefusedWithoutDryRun(t *testing.T) {
	for _, args := range [][]string{
		{"cluster", "drain", "eu"},
		{"rebalance"},
		{"cluster", "replace", "eu", "--with", "us"},
		{"cluster", "remove", "eu"},
	} {
		for _, extra := range [][]string{{"-o", "json"}, {"--output=yaml", "--dry-run=none"}} {
			err := execute(t, append(args, extra...)...)
			if err == nil || !strings.Contains(err.Error(), "applies to --dry-run") {
				t.Errorf("%v %v: error %v, want -o refused without --dry-run", args, extra, err)
			}
		}
		err := execute(t, append(args, "--dry-run", "-o", "wide")...)
		if err == nil || !strings.Contains(err.Error(), `--output "wide": want one of json, yaml`) {
			t.Errorf("%v -o wide: error %v, want the formats named", args, err)
		}
	}
}

// execute runs flotillactl with a kubeconfig that does not exist: a command that reads anything
// fails on it.
func execute(t *testing.T, args ...string) error {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRootCommand(&out, &errOut)
	root.SetArgs(append([]string{"--kubeconfig", "/nonexistent"}, args...))
	return root.ExecuteContext(t.Context())
}

// The help of each command that plans shows --dry-run and -o, and an example of them together.
func TestPlanningCommandsHelpShowDryRunOutput(t *testing.T) {
	for _, args := range [][]string{
		{"cluster", "drain", "--help"},
		{"rebalance", "--help"},
		{"cluster", "replace", "--help"},
		{"cluster", "remove", "--help"},
	} {
		out, err := run(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"--dry-run", "-o, --output", "-o applies to --dry-run only", "--dry-run -o "} {
			if !strings.Contains(out, want) {
				t.Errorf("%v does not say %q", args, want)
			}
		}
	}
	if out, _ := run(t, "trace", "pod", "--help"); !strings.Contains(out, "-o yaml") {
		t.Errorf("trace pod --help does not show -o yaml:\n%s", out)
	}
}
