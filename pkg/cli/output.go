package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/flotilla-dev/flotilla/internal/document"
	"github.com/flotilla-dev/flotilla/internal/dryrun"
)

// checkOutput refuses an --output a command does not print, naming those it does.
func checkOutput(output string, formats ...string) error {
	if output == "" || slices.Contains(formats, output) {
		return nil
	}
	return fmt.Errorf("--output %q: want one of %s, or no --output", output, strings.Join(formats, ", "))
}

// checkPlanOutput refuses what --output a command that plans (drain, rebalance, replace,
// remove) cannot print: a format other than json and yaml, or any without --dry-run, since a real
// run prints its progress as it goes, and that is no one document.
func checkPlanOutput(output string, dry dryrun.Mode) error {
	if err := checkOutput(output, "json", "yaml"); err != nil {
		return err
	}
	if output != "" && !dry.On() {
		return fmt.Errorf("--output %s applies to --dry-run: it prints the plan as one document; "+
			"add --dry-run to see the plan, or leave out --output to act", output)
	}
	return nil
}

// printDocument prints doc as one JSON or YAML document (internal/document).
func printDocument(out io.Writer, format string, doc any) error {
	return document.Print(out, format, doc)
}

// emptyIfNil is s, or an empty list when s is nil: documents print [] where a list is empty,
// never null.
func emptyIfNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
