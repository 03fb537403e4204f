package leadermetrics

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// DefaultScrapeTimeout bounds one scrape's list when its collector sets no timeout.
const DefaultScrapeTimeout = 5 * time.Second

// List lists into list for one scrape of a collector computed from the manager's cache: from
// parent, the context its Start got (nil before Start: false, nothing to send), within timeout
// (DefaultScrapeTimeout when not positive). A failed list is logged and sent as an invalid
// metric of desc, which fails the scrape (Prometheus's up is 0) rather than report nothing; what
// names the objects in both.
func List(parent context.Context, timeout time.Duration, r client.Reader, list client.ObjectList, ch chan<- prometheus.Metric,
	desc *prometheus.Desc, what string, opts ...client.ListOption) bool {
	if parent == nil {
		return false
	}
	if timeout <= 0 {
		timeout = DefaultScrapeTimeout
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	if err := r.List(ctx, list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the "+what+" for their metrics")
		ch <- prometheus.NewInvalidMetric(desc, fmt.Errorf("listing the %s: %w", what, err))
		return false
	}
	return true
}
