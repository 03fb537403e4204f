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
	}, []string{"cluster", "role"})
	probeFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flotilla_cluster_probe_failures_total",
		Help: "Failed health probes per registered cluster.",
	}, []string{"cluster"})
	tokenRenewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flotilla_cluster_token_renewals_total",
		Help: "ServiceAccount token renewals per registered cluster, by result.",
	}, []string{"cluster", "result"})
)

func init() {
	metrics.Registry.MustRegister(clusterReady, probeFailures, tokenRenewals)
}

func recordState(s Snapshot) {
	v := 0.0
	if s.Status == flotillav1.ClusterRunning {
		v = 1
	}
	clusterReady.WithLabelValues(s.Name, string(s.Role)).Set(v)
}

func forgetCluster(name string) {
	clusterReady.DeletePartialMatch(prometheus.Labels{"cluster": name})
	probeFailures.DeletePartialMatch(prometheus.Labels{"cluster": name})
	tokenRenewals.DeletePartialMatch(prometheus.Labels{"cluster": name})
}
