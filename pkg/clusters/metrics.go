package clusters

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

var (
	clusterReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "flotilla_cluster_ready",
		Help: "1 when the registered cluster answers its health probes, else 0.",
	}, []string{"member_cluster", "role"})
	probeFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flotilla_cluster_probe_failures_total",
		Help: "Failed health probes per registered cluster.",
	}, []string{"member_cluster"})
	tokenRenewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flotilla_cluster_token_renewals_total",
		Help: "ServiceAccount token renewals per registered cluster, by result.",
	}, []string{"member_cluster", "result"})
	registrationRefused = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "flotilla_cluster_registration_refused",
		Help: "1 while the registration Secret's context of the cluster is refused (a credential or field Flotilla does not accept), else 0; cluster \"\" is the Secret as a whole (it does not parse).",
	}, []string{"member_cluster"})
	probeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "flotilla_cluster_probe_duration_seconds",
		Help: "Time of one health probe of a registered cluster (its /readyz, and its identity when read), failed ones included.",
		// Probes time out after ProbeTimeout (default 2 s).
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10},
	}, []string{"member_cluster"})
)

func init() {
	metrics.Registry.MustRegister(clusterReady, probeFailures, tokenRenewals, registrationRefused, probeDuration)
}

func recordState(s Snapshot) {
	v := 0.0
	if s.Status == flotillav1.ClusterRunning {
		v = 1
	}
	clusterReady.WithLabelValues(s.Name, string(s.Role)).Set(v)
	// Counted from 0 from the cluster's first state on, so that rate() and increase() see the
	// first failure (and the alert on renewals its first error).
	probeFailures.WithLabelValues(s.Name)
	tokenRenewals.WithLabelValues(s.Name, "renewed")
	tokenRenewals.WithLabelValues(s.Name, "error")
}

func forgetCluster(name string) {
	clusterReady.DeletePartialMatch(prometheus.Labels{"member_cluster": name})
	probeFailures.DeletePartialMatch(prometheus.Labels{"member_cluster": name})
	tokenRenewals.DeletePartialMatch(prometheus.Labels{"member_cluster": name})
	registrationRefused.DeletePartialMatch(prometheus.Labels{"member_cluster": name})
	probeDuration.DeletePartialMatch(prometheus.Labels{"member_cluster": name})
}

// recordRefused says whether the registration of cluster ("": the Secret as a whole) is refused.
func recordRefused(cluster string, refused bool) {
	v := 0.0
	if refused {
		v = 1
	}
	registrationRefused.WithLabelValues(cluster).Set(v)
}
