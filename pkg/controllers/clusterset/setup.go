package clusterset

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
	"sigs.k8s.io/controller-runtime/pkg/source"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// Clusters is the registry's source of cluster changes.
type Clusters interface {
	ClusterSource(h handler.EventHandler) source.Source
}

// SetupWithManager watches ClusterSets, and resolves every set again when a cluster joins, leaves
// or changes state, or a virtual node's labels change (a selector matches them).
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, clusters Clusters, options controller.Options) error {
	everySet := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var sets flotillav1.ClusterSetList
		if err := r.Client.List(ctx, &sets); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing ClusterSets to resolve them again")
			return nil
		}
		out := make([]reconcile.Request, 0, len(sets.Items))
		for _, s := range sets.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: s.Name}})
		}
		return out
	})
	virtualNodes := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[flotillav1.LabelCluster] != "" })
	return ctrl.NewControllerManagedBy(mgr).
		Named("clusterset").
		For(&flotillav1.ClusterSet{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, everySet, builder.WithPredicates(virtualNodes, predicate.LabelChangedPredicate{})).
		WatchesRawSource(clusters.ClusterSource(everySet)).
		WithOptions(options).
		Complete(r)
}
