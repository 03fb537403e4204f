package replicator

import (
	"context"
	"time"

	"github.com/flotilla-dev/flotilla/internal/leadermetrics"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

var (
	applyDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "flotilla_replicator_apply_duration_seconds",
		Help:    "Time of one Replicator's apply in one cluster (its namespace, every object, the health read back), per cluster (primary for the primary).",
		Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, []string{"member_cluster"})
	applyErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flotilla_replicator_apply_errors_total",
		Help: "Applies of a Replicator that did not sync a cluster (an object refused, the cluster not usable or not answering), per cluster.",
	}, []string{"member_cluster"})
)

func init() { metrics.Registry.MustRegister(applyDuration, applyErrors) }

// observeApply records one apply in one cluster: its time, and an error when it did not sync.
func observeApply(pr placeResult, took time.Duration) {
	applyDuration.WithLabelValues(pr.sync.Name).Observe(took.Seconds())
	errs := applyErrors.WithLabelValues(pr.sync.Name) // 0 from the first apply, so rate() sees the first error
	if !pr.sync.Synced {
		errs.Inc()
	}
}

// SyncMetrics serves, at each scrape, flotilla_replicator_synced: 1 for each Replicator whose
// status says synced in every target, else 0, computed from the Replicators the manager's cache
// holds (right after deletions too). It runs on the leader (a manager Runnable), registered on
// controller-runtime's registry while it runs.
type SyncMetrics struct {
	// Reader lists Replicators (the manager's cache).
	Reader client.Reader
	// Timeout bounds one scrape's list (default 5 s).
	Timeout time.Duration

	ctx context.Context
}

var (
	_ prometheus.Collector = (*SyncMetrics)(nil)
	_ manager.Runnable     = (*SyncMetrics)(nil)

	syncedDesc = prometheus.NewDesc("flotilla_replicator_synced",
		"1 when the Replicator's last apply synced every target cluster (status.synced), else 0; one series per Replicator.",
		[]string{"replicator"}, nil)
)

// Start registers the collector and unregisters it when ctx ends.
func (s *SyncMetrics) Start(ctx context.Context) error {
	s.ctx = ctx
	return leadermetrics.Serve(ctx, s, "Replicator metrics")
}

// Describe sends the gauge's description.
func (s *SyncMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- syncedDesc }

// Collect lists the Replicators and sends the gauge; a failed list fails the scrape.
func (s *SyncMetrics) Collect(ch chan<- prometheus.Metric) {
	var list flotillav1.ReplicatorList
	if !leadermetrics.List(s.ctx, s.Timeout, s.Reader, &list, ch, syncedDesc, "Replicators") {
		return
	}
	for i := range list.Items {
		rep := &list.Items[i]
		v := 0.0
		if rep.Status.Synced == flotillav1.SyncedTrue {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(syncedDesc, prometheus.GaugeValue, v, rep.Name)
	}
}
