package setup_test

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/flotilla-dev/flotilla/pkg/setup"
)

// The defaults are one struct: change what differs, then validate.
func ExampleDefaultOptions() {
	opts := setup.DefaultOptions()
	opts.Election.PodNetwork = setup.PodNetworkFlat
	fmt.Println(opts.Validate(), opts.VirtualNodes.FailoverAfter, opts.Clusters.ProbeInterval)
	// Output: <nil> 30s 2s
}

// A manager with faster probes, as an integration suite runs it.
func ExampleNew() {
	run := func(ctx context.Context, cfg *rest.Config) error {
		opts := setup.DefaultOptions()
		opts.LeaderElection.Enabled = false
		opts.Clusters.ProbeInterval = 500 * time.Millisecond
		mgr, err := setup.New(ctx, cfg, opts, ctrl.Log)
		if err != nil {
			return err
		}
		return mgr.Start(ctx)
	}
	_ = run
}
