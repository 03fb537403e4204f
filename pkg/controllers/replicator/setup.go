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
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// SetupWithManager watches Replicators, what they applied in the primary (label
// flotilla.dev/replicator) and, through the registry, in every secondary: an edit or a deletion
// anywhere brings the Replicator back within a reconcile.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, options controller.Options) error {
	toReplicator := handler.EnqueueRequestsFromMapFunc(r.replicatorOf)
	labelled := builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[flotillav1.LabelReplicator] != ""
	}))
	b := ctrl.NewControllerManagedBy(mgr).
		Named("replicator").
		For(&flotillav1.Replicator{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{}, deletionPredicate())))
	// A changed Override reaches the copies at once: the Replicators of its namespace (every
	// Replicator, for a ClusterOverride) apply again.
	if r.WatchOverrides {
		b = b.Watches(&flotillav1.Override{}, handler.EnqueueRequestsFromMapFunc(r.replicatorsOfNamespace)).
			Watches(&flotillav1.ClusterOverride{}, handler.EnqueueRequestsFromMapFunc(r.replicatorsOfNamespace))
	}
	watched, err := watchedKinds(mgr.GetScheme())
	if err != nil {
		return err
	}
	for _, obj := range watched {
		b = b.Watches(obj, toReplicator, labelled).
			WatchesRawSource(r.Registry.Source(driftWatch(obj), toReplicator))
	}
	return b.WithOptions(options).Complete(r)
}

// driftWatch follows, in every secondary, this primary's objects of one kind that a Replicator
// applied (label flotilla.dev/replicator), so drift there is repaired at once. Secrets are never
// among the watched kinds: Flotilla never reads a Secret of a secondary, and the periodic resync
// repairs them.
func driftWatch(obj client.Object) clusters.Watch {
	return clusters.Watch{
		Name:   "replicated " + fmt.Sprintf("%T", obj),
		Object: obj,
		Selector: func(primaryID string) string {
			return flotillav1.LabelPrimary + "=" + primaryID + "," + flotillav1.LabelReplicator
		},
	}
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

// Watches are the registry's watches of what Replicators applied in secondaries, one per kind
// whose drift is repaired at once.
func Watches(scheme *runtime.Scheme) ([]clusters.Watch, error) {
	objs, err := watchedKinds(scheme)
	if err != nil {
		return nil, err
	}
	out := make([]clusters.Watch, 0, len(objs))
	for _, o := range objs {
		out = append(out, driftWatch(o))
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
		// A cache read fails only while the manager stops; the resync brings it back otherwise.
		ctrl.LoggerFrom(ctx).Error(err, "Listing Replicators to map an applied object back", "object", client.ObjectKeyFromObject(o))
		return nil
	}
	for _, rep := range reps.Items {
		if flotillav1.ReplicatorLabelValue(rep.Name) == value {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: rep.Name}}}
		}
	}
	return nil
}

// replicatorsOfNamespace are the Replicators whose replication namespace is the object's (every
// Replicator for a cluster-scoped object).
func (r *Reconciler) replicatorsOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	var reps flotillav1.ReplicatorList
	if err := r.Client.List(ctx, &reps); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing Replicators to apply an Override's change")
		return nil
	}
	var out []reconcile.Request
	for _, rep := range reps.Items {
		if o.GetNamespace() == "" || rep.Spec.ReplicationNamespace == o.GetNamespace() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: rep.Name}})
		}
	}
	return out
}
