package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/pkg/setup"
	"github.com/flotilla-dev/flotilla/pkg/uninstall"
)

// runUninstall is `flotilla-manager uninstall`, which the chart's pre-delete hook runs: the image
// holds this binary only, so the cleanup that `flotillactl uninstall` offers lives here too.
func runUninstall(args []string) int {
	var o uninstall.Options
	var kubeconfig, kubecontext string
	fs := pflag.NewFlagSet("flotilla-manager uninstall", pflag.ContinueOnError)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the primary cluster; empty: in-cluster config")
	fs.StringVar(&kubecontext, "context", "", "context of --kubeconfig to use")
	o.AddFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "flotilla-manager uninstall removes what the manager created at run time in the primary "+
			"(webhook configuration, virtual nodes, ClusterDetectors, its Secrets and Lease). It refuses while elected "+
			"pods or Replicators exist, unless --orphan.\n\nUsage:\n  flotilla-manager uninstall [flags]\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := restConfig(kubeconfig, kubecontext)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-manager uninstall:", err)
		return 1
	}
	c, err := client.New(cfg, client.Options{Scheme: setup.NewScheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-manager uninstall:", err)
		return 1
	}
	o.Out = os.Stdout
	if err := uninstall.Run(ctx, c, o); err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-manager uninstall:", err)
		return 1
	}
	return 0
}
