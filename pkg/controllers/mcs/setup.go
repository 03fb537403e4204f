package mcs

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// SetupWithManager watches ServiceExports, Services, EndpointSlices and this primary's
// ServiceImports in the primary and, through the registry, in every secondary, each mapped to
// the name it is about; the secondaries' namespaces opened to this primary; the cluster sets and
// their bindings (WatchTenancy); and the clusters' states, which move every name seen (a
// secondary that stops answering leaves the imports after the failover bound, and comes back).
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	toName := handler.EnqueueRequestsFromMapFunc(nameOf)
	// Services and EndpointSlices are many, and few are exported: only those of a name seen
	// exported (or Flotilla's own) wake a reconcile; an export's own event reads the rest.
	toExported := handler.EnqueueRequestsFromMapFunc(r.exportedNameOf)
	// An export's name is marked seen as its event arrives, before its reconcile: a Service that
	// comes after it (the cache may hold the export first) then wakes the name.
	toExport := handler.EnqueueRequestsFromMapFunc(r.exportNameOf)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("mcs").
		Watches(&mcsv1beta1.ServiceExport{}, toExport).
		Watches(&mcsv1beta1.ServiceImport{}, toName).
		Watches(&corev1.Service{}, toExported).
		Watches(&discoveryv1.EndpointSlice{}, toExported).
		WatchesRawSource(r.Registry.Source(exportsWatch, toExport)).
		WatchesRawSource(r.Registry.Source(importsWatch, toName))
	for _, w := range []clusters.Watch{servicesWatch, slicesWatch} {
		b = b.WatchesRawSource(r.Registry.Source(w, toExported))
	}
	b = b.WatchesRawSource(r.Registry.Source(namespacesWatch, handler.EnqueueRequestsFromMapFunc(r.namesIn)))
	if r.WatchTenancy {
		// A binding changes what its namespace may use; a set, what every bound namespace may.
		b = b.Watches(&flotillav1.ClusterSetBinding{}, handler.EnqueueRequestsFromMapFunc(r.namesInNamespaceOf)).
			Watches(&flotillav1.ClusterSet{}, handler.EnqueueRequestsFromMapFunc(r.everyName))
	}
	return b.WatchesRawSource(r.Registry.ClusterSource(handler.EnqueueRequestsFromMapFunc(r.everyName))).
		WithOptions(options).
		Complete(r)
}

// nameOf is the exported name an object is about: a Service's or an import's own, an
// EndpointSlice's Service, or the name an object Flotilla wrote for an import carries.
func nameOf(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetName()
	if n := o.GetLabels()[mcsv1beta1.LabelServiceName]; n != "" {
		name = n
	} else if _, ok := o.(*discoveryv1.EndpointSlice); ok {
		if name = o.GetLabels()[discoveryv1.LabelServiceName]; name == "" {
			return nil
		}
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
}

// exportNameOf is nameOf for a ServiceExport, whose name it marks seen exported.
func (r *Reconciler) exportNameOf(ctx context.Context, o client.Object) []reconcile.Request {
	reqs := nameOf(ctx, o)
	for _, req := range reqs {
		r.names.Store(req.NamespacedName, true)
	}
	return reqs
}

// exportedNameOf is nameOf for a name seen exported (r.names), or an object Flotilla wrote;
// nothing for the rest.
func (r *Reconciler) exportedNameOf(ctx context.Context, o client.Object) []reconcile.Request {
	reqs := nameOf(ctx, o)
	if o.GetLabels()[flotillav1.LabelPrimary] != "" {
		return reqs
	}
	out := reqs[:0]
	for _, req := range reqs {
		if _, seen := r.names.Load(req.NamespacedName); seen {
			out = append(out, req)
		}
	}
	return out
}

// namesIn enqueues the names seen exported in a namespace: opened or closed in a secondary, its
// exports there start or stop counting.
func (r *Reconciler) namesIn(_ context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	r.names.Range(func(k, _ any) bool {
		if key := k.(client.ObjectKey); key.Namespace == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: key})
		}
		return true
	})
	return out
}

// namesInNamespaceOf enqueues the names seen exported in an object's namespace.
func (r *Reconciler) namesInNamespaceOf(ctx context.Context, o client.Object) []reconcile.Request {
	return r.namesIn(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.GetNamespace()}})
}

// everyName enqueues every name seen exported.
func (r *Reconciler) everyName(context.Context, client.Object) []reconcile.Request {
	var out []reconcile.Request
	r.names.Range(func(k, _ any) bool {
		out = append(out, reconcile.Request{NamespacedName: k.(client.ObjectKey)})
		return true
	})
	return out
}
