package setup

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Concurrency of the reconcilers that have no setting of their own.
const (
	replicatorWorkers = 4
	dependencyWorkers = 4
	mcsWorkers        = 4
)

// registrationOptions: one Secret, one worker. The controller runs on every replica whatever the
// options say (each replica's webhook and kubelet API read their own registry).
func registrationOptions() controller.Options { return controller.Options{} }

// fleetQuotaOptions: one worker admits to the FleetQuotas (a namespace at a time in any case:
// the request is the namespace).
func fleetQuotaOptions() controller.Options { return controller.Options{} }

// clusterSetOptions: one worker writes the ClusterSets' status (a few sets, each cheap).
func clusterSetOptions() controller.Options { return controller.Options{} }

// overrideOptions: one worker; an Override's status changes only with its spec.
func overrideOptions() controller.Options { return controller.Options{MaxConcurrentReconciles: 1} }

// clusterDetectorOptions: one worker writes the ClusterDetectors' status.
func clusterDetectorOptions() controller.Options { return controller.Options{} }

// agentCredentialOptions: one worker; a credential written is a token minted and one patch.
func agentCredentialOptions() controller.Options { return controller.Options{} }

// replicatorOptions: Replicators applied in parallel, each to its clusters in parallel too.
// inventoryOptions: one key, the whole inventory.
func inventoryOptions() controller.Options {
	return controller.Options{MaxConcurrentReconciles: 1}
}

// mcsOptions: one exported name per reconcile, across every cluster.
func mcsOptions() controller.Options {
	return controller.Options{MaxConcurrentReconciles: mcsWorkers}
}

func replicatorOptions() controller.Options {
	return controller.Options{MaxConcurrentReconciles: replicatorWorkers}
}

// dependencyOptions: the sync's concurrency (its rate limiter is its own: its items are not
// reconcile.Requests).
func dependencyOptions() controller.Options {
	return controller.Options{MaxConcurrentReconciles: dependencyWorkers}
}

// proxyOptions: ProxyWorkers in parallel, with per-item backoff only: client-go's default also
// caps all items at 10/s, which would throttle a burst of elected pods behind the first failures.
func proxyOptions(o ElectionOptions) controller.Options {
	return controller.Options{MaxConcurrentReconciles: o.ProxyWorkers,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](20*time.Millisecond, 10*time.Second)}
}
