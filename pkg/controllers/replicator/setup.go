package replicator

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// SetupWithManager watches Replicators, what they applied in the primary (label
// flotilla.dev/replicator) and, through the registry, in every secondary: an edit or a deletion
// anywhere brings the Replicator back within a reconcile.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, options controller.Options) error {
	toReplicator := handler.EnqueueRequestsFromMapFunc(r.replicatorOf)
	labelled := builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[flotillav1.LabelReplicator] != ""
	}))
	return ctrl.NewControllerManagedBy(mgr).
		Named("replicator").
		For(&flotillav1.Replicator{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{}, deletionPredicate()))).
		Watches(&appsv1.Deployment{}, toReplicator, labelled).
		Watches(&corev1.ConfigMap{}, toReplicator, labelled).
		Watches(&corev1.Service{}, toReplicator, labelled).
		Watches(&networkingv1.Ingress{}, toReplicator, labelled).
		WatchesRawSource(r.Registry.ReplicaSource(toReplicator)).
		WithOptions(options).
		Complete(r)
}

// deletionPredicate passes a Replicator whose deletion started (its generation does not change).
func deletionPredicate() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
}

// replicatorOf maps an object's flotilla.dev/replicator label back to its Replicator (the label
// holds the name, shortened with a hash when longer than a label value may be).
func (r *Reconciler) replicatorOf(ctx context.Context, o client.Object) []reconcile.Request {
	value := o.GetLabels()[flotillav1.LabelReplicator]
	var reps flotillav1.ReplicatorList
	if err := r.Client.List(ctx, &reps); err != nil {
		return nil
	}
	for _, rep := range reps.Items {
		if LabelValue(rep.Name) == value {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: rep.Name}}}
		}
	}
	return nil
}
