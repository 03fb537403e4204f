package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/pkg/version"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRootCommand(&out, &errOut)
	root.SetArgs(args)
	err := root.Execute()
	return out.String() + errOut.String(), err
}

func TestVersion(t *testing.T) {
	out, err := run(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "flotillactl "+version.Get().Version) {
		t.Errorf("version printed %q", out)
	}
	out, err = run(t, "version", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var info version.Info
	if err := json.Unmarshal([]byte(out), &info); err != nil || info != version.Get() {
		t.Errorf("json version = %q (%v), want %+v", out, err, version.Get())
	}
	if _, err := run(t, "version", "-o", "yaml"); err == nil || !strings.Contains(err.Error(), "want json") {
		t.Errorf("unknown output format: err = %v", err)
	}
}

func TestHelpNamesTheCommandsAndGlobalFlags(t *testing.T) {
	out, err := run(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"virtual node", "version", "--kubeconfig", "--context", "cluster"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
}
