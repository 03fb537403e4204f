package clusterdetector

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// SetupWithManager watches ClusterDetectors and the registry's cluster changes.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, options controller.Options) error {
	// The primary's detector also shows the registration's state and which context is the
	// primary, so every change reaches it as well as the changed cluster's own.
	toDetectors := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		reqs := []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: r.PrimaryName}}}
		if name := o.GetName(); name != "" && name != r.PrimaryName {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: name}})
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("clusterdetector").
		For(&flotillav1.ClusterDetector{}).
		WatchesRawSource(r.Registry.ClusterSource(toDetectors)).
		WithOptions(options).
		Complete(r)
}
