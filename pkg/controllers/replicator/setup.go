package replicator

import (
	"context"
	"fmt"

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
	for _, w := range driftWatches() {
		b = b.Watches(w.Object, toReplicator, labelled).
			WatchesRawSource(r.Registry.Source(w, toReplicator))
	}
	return b.WithOptions(options).Complete(r)
}

// driftWatches are the kinds whose drift is repaired at once, in the primary and in every
// secondary: this primary's objects that a Replicator applied (label flotilla.dev/replicator).
// Secrets are not among them: Flotilla never reads a Secret of a secondary, and the periodic
// resync repairs them.
func driftWatches() []clusters.Watch {
	objects := []client.Object{&appsv1.Deployment{}, &corev1.ConfigMap{}, &corev1.Service{}, &networkingv1.Ingress{}}
	out := make([]clusters.Watch, 0, len(objects))
	for _, o := range objects {
		out = append(out, clusters.Watch{
			Name:   "replicated " + fmt.Sprintf("%T", o),
			Object: o,
			Selector: func(primaryID string) string {
				return flotillav1.LabelPrimary + "=" + primaryID + "," + flotillav1.LabelReplicator
			},
		})
	}
	return out
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
		if LabelValue(rep.Name) == value {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: rep.Name}}}
		}
	}
	return nil
}
