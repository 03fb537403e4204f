package dryrun

import (
	"testing"

	"github.com/spf13/pflag"
)

func TestTheFlagTakesKubectlsShapeAndTheOldBool(t *testing.T) {
	for args, want := range map[string]Mode{
		"":                 None,
		"--dry-run":        Client,
		"--dry-run=client": Client,
		"--dry-run=server": Server,
		"--dry-run=none":   None,
		"--dry-run=true":   Client,
		"--dry-run=false":  None,
	} {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		var m Mode
		AddFlag(fs, &m, "print")
		var argv []string
		if args != "" {
			argv = []string{args}
		}
		if err := fs.Parse(argv); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if m != want {
			t.Errorf("%q: %q, want %q", args, m, want)
		}
	}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	var m Mode
	AddFlag(fs, &m, "print")
	if err := fs.Parse([]string{"--dry-run=maybe"}); err == nil {
		t.Error("--dry-run=maybe was taken")
	}
}
