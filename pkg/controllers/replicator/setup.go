package replicator

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
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
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toReplicator := handler.EnqueueRequestsFromMapFunc(r.replicatorOf)
	labelled := builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[flotillav1.LabelReplicator] != ""
	}))
	b := ctrl.NewControllerManagedBy(mgr).
		Named("replicator").
		For(&flotillav1.Replicator{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{}, deletionPredicate())))
	watched, err := watchedKinds(mgr.GetScheme())
	if err != nil {
		return err
	}
	for _, obj := range watched {
		b = b.Watches(obj, toReplicator, labelled)
	}
	return b.WatchesRawSource(r.Registry.ReplicaSource(toReplicator)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}

// watchedKinds are empty objects of the kinds whose drift is repaired at once
// (flotillav1.ReplicatedKinds' Watched), typed as the scheme knows them: the manager's cache shares
// their informers with every other controller watching the same kinds.
func watchedKinds(scheme *runtime.Scheme) ([]client.Object, error) {
	var out []client.Object
	for _, k := range flotillav1.ReplicatedKinds {
		if !k.Watched {
			continue
		}
		obj, err := scheme.New(k.GroupVersionKind())
		if err != nil {
			return nil, fmt.Errorf("watching what Replicators applied of %s: %w", k.Kind, err)
		}
		o, ok := obj.(client.Object)
		if !ok {
			return nil, fmt.Errorf("watching what Replicators applied of %s: %T is no object", k.Kind, obj)
		}
		out = append(out, o)
	}
	return out, nil
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
