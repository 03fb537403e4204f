package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/logging"
	"github.com/flotilla-dev/flotilla/pkg/setup"
)

// runLender runs the lender of a secondary: it holds each primary joined here to the
// PrimaryAllowance this cluster's admin wrote for it.
func runLender(args []string) int {
	var kubeconfig, kubecontext string
	var logOpts logging.Options
	o := setup.LenderOptions{MetricsBindAddress: ":8080", HealthProbeBindAddress: ":8081", LeaderElection: true,
		LeaderElectionNamespace: flotillav1.SystemNamespace}
	fs := pflag.NewFlagSet("flotilla-manager lender", pflag.ContinueOnError)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of this cluster (default: in-cluster, then the default rules)")
	fs.StringVar(&kubecontext, "context", "", "context of --kubeconfig")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "address of the metrics endpoint (0 turns it off)")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "address of /healthz and /readyz (0 turns them off)")
	var namePrefix string
	fs.StringVar(&namePrefix, "name-prefix", flotillav1.DefaultNamePrefix, "prefix of the lender's Lease's name, <prefix>-lender.flotilla.dev (the chart's fullname)")
	fs.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection, "elect one replica to lend (Lease <name-prefix>-lender.flotilla.dev)")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "namespace of the lender's Lease")
	logOpts.AddFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "flotilla-manager lender runs in a secondary and holds each primary joined there to the "+
			"PrimaryAllowance its admin wrote (flotillactl cluster join --allow, or kubectl edit primaryallowance): a "+
			"ResourceQuota in every namespace that primary manages, their limits adding up to no more than the allowance, "+
			"enforced by this cluster's API server.\n\nUsage:\n  flotilla-manager lender [flags]\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := setup.ValidateNamePrefix(namePrefix); err != nil {
		fmt.Fprintf(os.Stderr, "flotilla-manager lender: --name-prefix %q: %v\n", namePrefix, err)
		return 2
	}
	o.LeaseName = flotillav1.NamesFrom(namePrefix).LenderLease
	log, err := logging.New(logOpts, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-manager lender:", err)
		return 2
	}
	ctrl.SetLogger(log)
	cfg, err := restConfig(kubeconfig, kubecontext)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-manager lender:", err)
		return 2
	}
	ctx := ctrl.SetupSignalHandler()
	mgr, err := setup.NewLender(ctx, cfg, o, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-manager lender:", err)
		return 1
	}
	if err := mgr.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-manager lender:", err)
		return 1
	}
	return 0
}
