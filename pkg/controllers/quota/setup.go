package quota

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// SetupWithManager watches FleetQuotas and the proxies (the manager's cache holds proxies only),
// each mapped to its namespace: a proxy's event matters where the namespace has a quota, or the
// proxy waits for one (its quota deleted, it goes free).
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, options controller.Options) error {
	toNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.GetNamespace()}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("fleetquota").
		Watches(&flotillav1.FleetQuota{}, toNamespace).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.namespaceOfProxy)).
		WithOptions(options).
		Complete(r)
}

// namespaceOfProxy is the namespace of a proxy that waits for quota, or of any proxy where the
// namespace has a FleetQuota (one going frees room).
func (r *Reconciler) namespaceOfProxy(ctx context.Context, o client.Object) []reconcile.Request {
	req := []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.GetNamespace()}}}
	if _, ok := o.GetAnnotations()[flotillav1.AnnotationQuota]; ok {
		return req
	}
	var quotas flotillav1.FleetQuotaList
	if err := r.Client.List(ctx, &quotas, client.InNamespace(o.GetNamespace())); err != nil || len(quotas.Items) == 0 {
		return nil
	}
	return req
}
