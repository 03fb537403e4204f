package quota

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/flotilla-dev/flotilla/internal/leadermetrics"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// Metrics serves, at each scrape, each FleetQuota's limits and usage overall
// (flotilla_fleetquota_hard, flotilla_fleetquota_used) and the pods waiting for it, from the
// quotas' status in the manager's cache. It runs on the leader, which writes that status.
type Metrics struct {
	// Reader lists FleetQuotas (the manager's cache).
	Reader client.Reader
	// Timeout bounds one scrape's list (leadermetrics.DefaultScrapeTimeout when zero).
	Timeout time.Duration

	ctx context.Context
}

var (
	_ prometheus.Collector = (*Metrics)(nil)
	_ manager.Runnable     = (*Metrics)(nil)

	hardDesc = prometheus.NewDesc("flotilla_fleetquota_hard",
		"A FleetQuota's overall limit of one resource (spec.hard), as its name there says it.", []string{"namespace", "quota", "resource"}, nil)
	usedDesc = prometheus.NewDesc("flotilla_fleetquota_used",
		"What the namespace's elected pods past the quota gate request of one resource a FleetQuota limits (status.used).", []string{"namespace", "quota", "resource"}, nil)
	waitingDesc = prometheus.NewDesc("flotilla_fleetquota_waiting_pods",
		"Elected pods waiting for room in a FleetQuota (status.waiting).", []string{"namespace", "quota"}, nil)
)

// Start registers the collector and unregisters it when ctx ends.
func (m *Metrics) Start(ctx context.Context) error {
	m.ctx = ctx
	return leadermetrics.Serve(ctx, m, "FleetQuota metrics")
}

// Describe sends the gauges' descriptions.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- hardDesc
	ch <- usedDesc
	ch <- waitingDesc
}

// Collect lists the FleetQuotas and sends the gauges; a failed list fails the scrape.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	var list flotillav1.FleetQuotaList
	if !leadermetrics.List(m.ctx, m.Timeout, m.Reader, &list, ch, usedDesc, "FleetQuotas") {
		return
	}
	for i := range list.Items {
		q := &list.Items[i]
		for name, hard := range q.Spec.Hard {
			used := q.Status.Used[name]
			ch <- prometheus.MustNewConstMetric(hardDesc, prometheus.GaugeValue, hard.AsApproximateFloat64(), q.Namespace, q.Name, string(name))
			ch <- prometheus.MustNewConstMetric(usedDesc, prometheus.GaugeValue, used.AsApproximateFloat64(), q.Namespace, q.Name, string(name))
		}
		ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, float64(q.Status.Waiting), q.Namespace, q.Name)
	}
}
