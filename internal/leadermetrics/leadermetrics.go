package leadermetrics

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Serve registers c on controller-runtime's registry until ctx ends (a leader-only Runnable's
// Start returns with it), then unregisters it; what names c in an error.
func Serve(ctx context.Context, c prometheus.Collector, what string) error {
	if err := metrics.Registry.Register(c); err != nil {
		return fmt.Errorf("registering the %s: %w", what, err)
	}
	<-ctx.Done()
	metrics.Registry.Unregister(c)
	return nil
}
