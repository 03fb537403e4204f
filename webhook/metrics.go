package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// The outcomes of the pod webhook (label outcome of flotilla_webhook_decisions_total).
const (
	// OutcomeElected is a pod admitted as a proxy bound to a cluster's virtual node.
	OutcomeElected = "elected"
	// OutcomeWaiting is a pod admitted as a proxy no cluster can take now: unbound, waiting for
	// room or gated.
	OutcomeWaiting = "waiting"
	// OutcomeSkipped is a pod that does not ask to be elected, let through unchanged.
	OutcomeSkipped = "skipped"
	// OutcomeDenied is an elected pod refused (a placement.Rejection: an unknown cluster, say).
	OutcomeDenied = "denied"
	// OutcomeError is a request the webhook could not judge (a read that failed, no seal key).
	OutcomeError = "error"
)

var decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "flotilla_webhook_decisions_total",
	Help: "Pod admission requests the webhook answered, by outcome (elected, waiting, skipped, denied, error) and, for elected, the cluster bound to.",
}, []string{"outcome", "member_cluster"})

func init() { metrics.Registry.MustRegister(decisions) }

// countDecision counts one answer of Handle.
func countDecision(outcome, cluster string) { decisions.WithLabelValues(outcome, cluster).Inc() }

// admittedOutcome is the outcome and cluster of a pod admitted as a proxy.
func admittedOutcome(proxy *corev1.Pod) (outcome, cluster string) {
	if c, ok := flotillav1.ClusterOfNode(proxy.Spec.NodeName); ok {
		return OutcomeElected, c
	}
	return OutcomeWaiting, ""
}
