package allowance

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
)

// SetupWithManager watches PrimaryAllowances, the namespaces primaries manage (a new one needs
// its quota) and the lender's quotas (a counted limit or usage moves the split), each mapped to
// the allowance of its primary.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, options controller.Options) error {
	byLabel := func(label string) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if id := o.GetLabels()[label]; id != "" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: id}}}
			}
			return nil
		})
	}
	managed := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[flotillav1.LabelManagedBy] != "" })
	return ctrl.NewControllerManagedBy(mgr).
		Named("primaryallowance").
		For(&flotillav1.PrimaryAllowance{}).
		Watches(&corev1.Namespace{}, byLabel(flotillav1.LabelManagedBy), builder.WithPredicates(managed)).
		Watches(&corev1.ResourceQuota{}, byLabel(flotillav1.LabelAllowance)).
		WithOptions(options).
		Complete(r)
}
