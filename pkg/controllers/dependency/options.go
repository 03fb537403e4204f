package dependency

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// keyOptions carries the caller's controller options over to the sync, whose items are Keys, not
// reconcile.Requests: what is typed by the item (Reconciler, RateLimiter, NewQueue,
// LogConstructor) cannot be carried, and the sync's rate limiter is its own.
func keyOptions(o controller.Options) controller.TypedOptions[Key] {
	return controller.TypedOptions[Key]{
		SkipNameValidation:      o.SkipNameValidation,
		MaxConcurrentReconciles: o.MaxConcurrentReconciles,
		CacheSyncTimeout:        o.CacheSyncTimeout,
		RecoverPanic:            o.RecoverPanic,
		NeedLeaderElection:      o.NeedLeaderElection,
		Logger:                  o.Logger,
		UsePriorityQueue:        o.UsePriorityQueue,
		EnableWarmup:            o.EnableWarmup,
		ReconciliationTimeout:   o.ReconciliationTimeout,
		RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[Key](100*time.Millisecond, time.Minute),
	}
}
