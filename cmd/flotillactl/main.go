// Command flotillactl is Flotilla's CLI (also usable as the kubectl plugin kubectl-flotilla).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/flotilla-dev/flotilla/pkg/cli"
)

func main() {
	// An interrupted command (Ctrl-C) stops at its next step and says where it was: a drain lists
	// what is left.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.NewRootCommand(os.Stdout, os.Stderr).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
