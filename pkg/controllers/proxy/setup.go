package proxy

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/delegates"
)

// nodeNameField indexes proxies by the virtual node they are bound to.
const nodeNameField = "spec.nodeName"

// SetupWithManager watches proxies in the primary and delegates in every secondary. When a
// secondary's delegate informer (re)starts, every proxy bound to it is checked against the live
// list: delegates removed while nothing watched (the secondary unregistered or unreachable) show
// in no event, and a proxy must never stay Running without one.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	isProxy := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[flotillav1.LabelProxy] == "true" })
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, nodeNameField, func(o client.Object) []string {
		if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing proxies by node: %w", err)
	}
	r.cache = mgr.GetCache()
	b := ctrl.NewControllerManagedBy(mgr).
		Named("proxy").
		// The watch event of a status write this reconciler made, and those of a proxy it let go,
		// bring nothing to decide on.
		For(&corev1.Pod{}, builder.WithPredicates(isProxy, predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool { return !r.own.echo(e.ObjectNew) && !r.own.letGo(e.ObjectNew) },
			DeleteFunc: func(e event.DeleteEvent) bool {
				if !r.own.letGo(e.Object) {
					return true // the reconcile forgets what is kept of it
				}
				r.forget(client.ObjectKeyFromObject(e.Object))
				return false
			},
		})).
		// A delegate has its proxy's namespace and name; only what it tells the proxy is news.
		WatchesRawSource(r.Secondaries.FilteredSource(delegates.Watch, &handler.EnqueueRequestForObject{}, r.delegateNews)).
		WatchesRawSource(source.Func(r.keepRunning)).
		WatchesRawSource(r.Secondaries.StartSource(delegates.Watch, handler.EnqueueRequestsFromMapFunc(r.proxiesOf))).
		// A Pod Security level changed in the primary reaches the secondaries' namespaces at once.
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.proxiesIn), builder.WithPredicates(podSecurityChanged))
	for _, s := range r.Dependencies {
		b = b.WatchesRawSource(s)
	}
	return b.
		WithOptions(options).
		Complete(r)
}

// proxiesOf lists the proxies bound to the virtual node of the cluster an object names.
func (r *Reconciler) proxiesOf(ctx context.Context, o client.Object) []reconcile.Request {
	return r.proxyRequests(ctx, "Listing the proxies of a secondary whose informer started", o,
		client.MatchingFields{nodeNameField: flotillav1.VirtualNodeName(o.GetName())})
}
