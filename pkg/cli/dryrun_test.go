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
