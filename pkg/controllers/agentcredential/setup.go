package agentcredential

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// SetupWithManager watches ClusterDetectors (a tunnel that connects shows in one) and the
// registry's cluster changes.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, options controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("agentcredential").
		For(&flotillav1.ClusterDetector{}).
		WatchesRawSource(r.Registry.ClusterSource(handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: o.GetName()}}}
		}))).
		WithOptions(options).
		Complete(r)
}
