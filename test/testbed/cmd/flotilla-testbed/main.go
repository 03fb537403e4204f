// Command flotilla-testbed starts and stops the local development bed behind `make dev-up`,
// `make dev-down` and `make demo`: a primary and secondaries as real local clusters.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/flotilla-dev/flotilla/test/testbed"
)

const usage = `Usage: flotilla-testbed up|down|status [flags]

  up      start a primary and N secondaries (kwok fake nodes) under --dir, and write
          <dir>/kubeconfig with contexts primary, secondary1, ...; a bed already running there is kept
  down    stop every cluster recorded under --dir and remove its state (logs/ is kept)
  status  say whether the bed under --dir answers

Flags:
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	dir := fs.String("dir", ".testbed", "work dir of the bed")
	secondaries := fs.Int("secondaries", 2, "number of secondary clusters")
	nodes := fs.Int("nodes", 2, "fake nodes per secondary")
	tools := fs.String("tools-dir", "", "folder of the binaries `make tools` built (default $FLOTILLA_TOOLS_DIR)")
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage); fs.PrintDefaults() }
	if err := fs.Parse(os.Args[2:]); err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var err error
	switch cmd {
	case "up":
		err = up(ctx, *dir, *tools, *secondaries, *nodes)
	case "down":
		err = down(ctx, *dir, *tools)
	case "status":
		err = status(ctx, *dir)
	default:
		fs.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-testbed:", err)
		os.Exit(1)
	}
}

func up(ctx context.Context, dir, tools string, secondaries, nodes int) error {
	if status(ctx, dir) == nil {
		fmt.Printf("testbed: already running; kubeconfig %s\n", filepath.Join(dir, "kubeconfig"))
		return nil
	}
	// Leftovers of an earlier bed that no longer answers would hold ports and memory.
	if err := down(ctx, dir, tools); err != nil {
		return err
	}
	bed, err := testbed.Start(ctx, testbed.Options{
		WorkDir: dir, ToolsDir: tools, Secondaries: secondaries, NodesPerSecondary: nodes,
		NoSecondaries: secondaries == 0, Log: os.Stdout,
	})
	if err != nil {
		return err
	}
	for _, c := range bed.Clusters() {
		fmt.Printf("testbed: context %-12s %d fake nodes\n", c.Name, len(c.Nodes))
	}
	return nil
}

func down(ctx context.Context, dir, tools string) error {
	if err := testbed.StopDir(ctx, dir, tools, os.Stdout); err != nil {
		return err
	}
	// Everything but the logs goes: the next `up` starts from nothing.
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() != "logs" {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// status checks that every context of the bed's kubeconfig answers /readyz.
func status(ctx context.Context, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return testbed.Check(ctx, filepath.Join(dir, "kubeconfig"))
}
