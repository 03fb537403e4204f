package inventory

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// key is the reconciler's one key: the inventory is written whole.
var key = reconcile.Request{NamespacedName: client.ObjectKey{Name: "inventory"}}

// SetupWithManager runs the reconciler on every change of a cluster's state, and once at start.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{key} })
	return ctrl.NewControllerManagedBy(mgr).
		Named("inventory").
		WatchesRawSource(r.Registry.ClusterSource(one)).
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			q.Add(key) // once at start: nothing may change for a long time
			return nil
		})).
		WithOptions(options).
		Complete(r)
}
