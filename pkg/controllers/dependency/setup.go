package dependency

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
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
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// MetadataWatch watches the metadata (never the content) of the primary's objects of the kinds
// read that way (translate.ReadMetadata: ConfigMaps and Secrets): enough to know when a copy is
// stale, without holding every Secret of the cluster in memory.
type MetadataWatch struct {
	factory metadatainformer.SharedInformerFactory
	inform  map[string]toolscache.SharedIndexInformer
}

// NewMetadataWatch prepares the informers; Start runs them.
func NewMetadataWatch(c metadata.Interface) *MetadataWatch {
	w := &MetadataWatch{factory: metadatainformer.NewFilteredSharedInformerFactory(c, 0, metav1.NamespaceAll, nil),
		inform: map[string]toolscache.SharedIndexInformer{}}
	for _, k := range translate.DependencyKinds {
		if k.Read == translate.ReadMetadata {
			w.inform[k.Kind] = w.factory.ForResource(k.Resource).Informer()
		}
	}
	for _, inf := range w.inform {
		_ = inf.SetTransform(MetadataOnlyKey)
	}
	return w
}

// MetadataOnlyKey is the transform of the metadata informers of every ConfigMap and Secret in the
// primary: only what the dependency reconciler reads (namespace, name, UID, resourceVersion) is
// kept. Their annotations may hold an object's whole content (kubectl's
// last-applied-configuration of a Secret is its data, in clear), and their labels and managed
// fields are of no use here: none of it stays in the manager's memory.
func MetadataOnlyKey(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion, DeletionTimestamp: m.DeletionTimestamp,
	}}, nil
}

// Version implements Versions.
func (w *MetadataWatch) Version(kind, namespace, name string) (string, bool) {
	inf, ok := w.inform[kind]
	if !ok {
		return "", false
	}
	obj, exists, err := inf.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return "", false
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return "", false
	}
	return m.ResourceVersion, true
}

// Start runs the informers until ctx ends.
func (w *MetadataWatch) Start(ctx context.Context) error {
	w.factory.Start(ctx.Done())
	for kind, inf := range w.inform {
		if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return fmt.Errorf("syncing the %s metadata cache: %w", kind, ctx.Err())
		}
	}
	<-ctx.Done()
	w.factory.Shutdown()
	return nil
}

// source is a source of the copies to look at when an object of kind changes or goes.
func (w *MetadataWatch) source(kind string, keys func(ctx context.Context, kind, namespace, name string) []Key) source.TypedSource[Key] {
	return metadataSource(w, kind, keys)
}

// metadataSource turns changes of one kind (namespace and name) into the requests keys maps them
// to. Its handler only adds to the controller's queue: it never blocks the informer.
func metadataSource[R comparable](w *MetadataWatch, kind string, keys func(ctx context.Context, kind, namespace, name string) []R) source.TypedSource[R] {
	return source.TypedFunc[R](func(ctx context.Context, q workqueue.TypedRateLimitingInterface[R]) error {
		call := func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if m, ok := obj.(metav1.Object); ok {
				for _, k := range keys(ctx, kind, m.GetNamespace(), m.GetName()) {
					q.Add(k)
				}
			}
		}
		if _, err := w.inform[kind].AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: call, DeleteFunc: call, UpdateFunc: func(_, obj any) { call(obj) },
		}); err != nil {
			return fmt.Errorf("watching %s metadata: %w", kind, err)
		}
		return nil
	})
}

// WaitingProxies are sources for the proxy reconciler: a referenced object read through the
// metadata watch (a ConfigMap or Secret) that appears or changes in the primary brings back at
// once the Pending proxies of its namespace that reference it (instead of their polling for it).
// proxies reads proxies (the manager's cache).
func (w *MetadataWatch) WaitingProxies(proxies client.Reader) []source.Source {
	keys := func(ctx context.Context, kind, namespace, name string) []reconcile.Request {
		var list corev1.PodList
		if err := proxies.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{flotillav1.LabelProxy: "true"}); err != nil {
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			p := &list.Items[i]
			if p.Status.Phase == corev1.PodPending && p.DeletionTimestamp == nil && translate.Uses(p, kind, &metav1.ObjectMeta{Name: name}) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)})
			}
		}
		return out
	}
	var out []source.Source
	for _, k := range translate.DependencyKinds {
		if k.Read == translate.ReadMetadata && k.Use == translate.UseReference {
			out = append(out, metadataSource(w, k.Kind, keys))
		}
	}
	return out
}

// SetupWithManager wires the sync: proxies and the kinds read from the manager's cache
// (Services, Ingresses, NetworkPolicies) from it, the kinds read as metadata (ConfigMaps and
// Secrets) from r.Metadata. Each event becomes the keys of the copies it may change.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, options controller.Options) error {
	w := r.Metadata
	if err := mgr.Add(w); err != nil {
		return fmt.Errorf("adding the metadata watch: %w", err)
	}
	r.Versions = w
	b := builder.TypedControllerManagedBy[Key](mgr).
		Named("dependencies").
		WatchesRawSource(source.TypedKind(mgr.GetCache(), &corev1.Pod{},
			handler.TypedEnqueueRequestsFromMapFunc(r.keysForProxy), proxyChanged()))
	for _, k := range translate.DependencyKinds {
		switch k.Read {
		case translate.ReadCache:
			kind := k.Kind
			var obj client.Object = k.New()
			b = b.WatchesRawSource(source.TypedKind(mgr.GetCache(), obj,
				handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []Key {
					return r.keysForObject(ctx, kind, o.GetNamespace(), o.GetName())
				})))
		case translate.ReadMetadata:
			b = b.WatchesRawSource(w.source(k.Kind, r.keysForObject))
		}
	}
	return b.WithOptions(keyOptions(options)).
		Complete(r)
}

// proxyChanged passes proxies whose placement, liveness or labels changed: status updates of a
// running proxy change no copy.
func proxyChanged() predicate.TypedPredicate[*corev1.Pod] {
	return predicate.TypedFuncs[*corev1.Pod]{
		CreateFunc: func(e event.TypedCreateEvent[*corev1.Pod]) bool { return isProxy(e.Object) },
		DeleteFunc: func(e event.TypedDeleteEvent[*corev1.Pod]) bool { return isProxy(e.Object) },
		UpdateFunc: func(e event.TypedUpdateEvent[*corev1.Pod]) bool {
			o, n := e.ObjectOld, e.ObjectNew
			return isProxy(n) && (o.Spec.NodeName != n.Spec.NodeName || translate.Terminal(o) != translate.Terminal(n) ||
				!o.DeletionTimestamp.Equal(n.DeletionTimestamp) || !maps.Equal(o.Labels, n.Labels))
		},
	}
}

// selectedByAny says whether one of the Services selects the proxy.
func selectedByAny(p *corev1.Pod, services []*corev1.Service) bool {
	for _, svc := range services {
		if translate.Uses(p, translate.KindService, svc) {
			return true
		}
	}
	return false
}

func isProxy(p *corev1.Pod) bool { return p.Labels[flotillav1.LabelProxy] == "true" }

// keysForProxy lists the copies a proxy uses in its secondary, of every kind kept in sync: the
// objects it references, and those that select it or send to Services that do.
func (r *Reconciler) keysForProxy(ctx context.Context, p *corev1.Pod) []Key {
	cluster, ok := flotillav1.ClusterOfNode(p.Spec.NodeName)
	if !ok {
		return nil
	}
	var keys []Key
	for _, k := range translate.DependencyKinds {
		if !k.Synced() {
			continue
		}
		for _, name := range r.usedNames(ctx, k, p) {
			keys = append(keys, Key{Cluster: cluster, Kind: k.Kind, Namespace: p.Namespace, Name: name})
		}
	}
	return keys
}

// usedNames names the objects of kind the proxy uses: those it references, or, of those in the
// cache, those that select it (directly or through their backend Services). An object that cannot
// be read is left out: its own events bring its keys.
func (r *Reconciler) usedNames(ctx context.Context, kind translate.DependencyKind, p *corev1.Pod) []string {
	var names []string
	if kind.Use == translate.UseReference {
		for _, ref := range kind.References(p) {
			names = append(names, ref.Name)
		}
		return names
	}
	list := kind.NewList()
	if err := r.Cache.List(ctx, list, client.InNamespace(p.Namespace)); err != nil {
		return nil
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil
	}
	for _, item := range items {
		obj, ok := item.(client.Object)
		if !ok {
			continue
		}
		if uses, err := r.usedBy(ctx, kind, obj); err == nil && uses(p) {
			names = append(names, obj.GetName())
		}
	}
	return names
}

// keysForObject lists the copies of an object of the primary: one per secondary that has, or may
// have had, a proxy using it. Deleted objects match no proxy any more, so every secondary with
// proxies in the namespace is asked (their reconcile removes what is no longer used).
func (r *Reconciler) keysForObject(ctx context.Context, kind, namespace, name string) []Key {
	var proxies corev1.PodList
	if err := r.Cache.List(ctx, &proxies, client.InNamespace(namespace)); err != nil {
		return nil
	}
	seen := map[string]bool{}
	var keys []Key
	for i := range proxies.Items {
		cluster, ok := flotillav1.ClusterOfNode(proxies.Items[i].Spec.NodeName)
		if ok && !seen[cluster] {
			seen[cluster] = true
			keys = append(keys, Key{Cluster: cluster, Kind: kind, Namespace: namespace, Name: name})
		}
	}
	return keys
}
