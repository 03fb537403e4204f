package volume

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// SetupWithManager watches the primary's claims of class flotilla, the proxies that use claims
// (a proxy bound to a virtual node decides its claims' cluster) and the real claims.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, options controller.Options) error {
	remote := predicate.NewPredicateFuncs(func(o client.Object) bool {
		pvc, ok := o.(*corev1.PersistentVolumeClaim)
		return ok && translate.RemoteClaim(pvc)
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("volume").
		For(&corev1.PersistentVolumeClaim{}, builder.WithPredicates(remote)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(claimsOf)).
		// A real claim has its primary claim's namespace and name.
		WatchesRawSource(r.Secondaries.Source(Watch, &handler.EnqueueRequestForObject{})).
		WithOptions(options).
		Complete(r)
}

// claimsOf are the claims a bound proxy uses.
func claimsOf(_ context.Context, o client.Object) []reconcile.Request {
	p, ok := o.(*corev1.Pod)
	if !ok || p.Labels[flotillav1.LabelProxy] != "true" || p.Spec.NodeName == "" {
		return nil
	}
	var out []reconcile.Request
	for _, name := range translate.VolumeClaims(p) {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: p.Namespace, Name: name}})
	}
	return out
}
