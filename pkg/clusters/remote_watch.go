package clusters

import (
	"context"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// remoteKind is a kind of secondary objects a controller can watch through the registry.
type remoteKind int

const (
	// remoteDelegates are this primary's delegates (pods labelled flotilla.dev/primary=<id>).
	remoteDelegates remoteKind = iota
	// remoteReplicas are the ConfigMaps, Services, Deployments and Ingresses this primary's
	// Replicators applied (label flotilla.dev/replicator). Secrets are not watched: Flotilla never
	// reads Secrets in a secondary; the Replicator's periodic resync repairs them.
	remoteReplicas
	// remoteChanges are cluster-state changes (ClusterSource).
	remoteChanges
	// remoteWatchStarts are starts of a secondary's delegate informer, once synced.
	remoteWatchStarts
)

// remoteWatch is the informers of one secondary that controllers watch through sources: this
// primary's delegates, and what its Replicators applied. Every source's handler is added to them
// once (handled), and a handler added late is replayed the informer's current objects.
type remoteWatch struct {
	cancel    context.CancelFunc
	done      <-chan struct{}
	delegates cache.SharedIndexInformer
	// deleted remembers the delegates the watch said were deleted.
	deleted   *deletedDelegates
	informers map[remoteKind][]cache.SharedIndexInformer
	// failed is set when a list or watch of its informers fails (reflectorFailed).
	failed atomic.Bool

	mu      sync.Mutex
	handled map[int]bool
}

// startRemoteWatch starts the label-selected informers of one secondary; cancel stops them.
func startRemoteWatch(ctx context.Context, cs kubernetes.Interface, primaryID string) *remoteWatch {
	ctx, cancel := context.WithCancel(ctx)
	noManagedFields := informers.WithTransform(func(obj any) (any, error) {
		if m, ok := obj.(metav1.Object); ok {
			m.SetManagedFields(nil)
		}
		return obj, nil
	})
	delegates := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(slimDelegate),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = flotillav1.LabelPrimary + "=" + primaryID }))
	replicas := informers.NewSharedInformerFactoryWithOptions(cs, 0, noManagedFields,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = flotillav1.LabelPrimary + "=" + primaryID + "," + flotillav1.LabelReplicator
		}))
	w := &remoteWatch{cancel: cancel, done: ctx.Done(), handled: map[int]bool{}, informers: map[remoteKind][]cache.SharedIndexInformer{}}
	w.delegates = delegates.Core().V1().Pods().Informer()
	w.deleted = &deletedDelegates{}
	_, _ = w.delegates.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: w.deleted.onDelete})
	w.informers[remoteDelegates] = []cache.SharedIndexInformer{w.delegates}
	w.informers[remoteReplicas] = []cache.SharedIndexInformer{
		replicas.Core().V1().ConfigMaps().Informer(),
		replicas.Core().V1().Services().Informer(),
		replicas.Apps().V1().Deployments().Informer(),
		replicas.Networking().V1().Ingresses().Informer(),
	}
	for _, list := range w.informers {
		for _, inf := range list {
			_ = inf.SetWatchErrorHandler(func(r *cache.Reflector, err error) {
				w.failed.Store(true)
				cache.DefaultWatchErrorHandler(ctx, r, err)
			})
		}
	}
	delegates.Start(ctx.Done())
	replicas.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		delegates.Shutdown()
		replicas.Shutdown()
	}()
	return w
}

// reflectorFailed says whether a list or watch of these informers failed since they started.
func (w *remoteWatch) reflectorFailed() bool { return w.failed.Load() }

// attach adds a sink's handler to the informers of its kind, once. client-go runs each handler on
// a goroutine of its own with an unbounded buffer; the handlers only add to a work queue, which
// never blocks and coalesces, so no informer ever waits and no event is dropped.
func (w *remoteWatch) attach(s *sink) {
	w.mu.Lock()
	if w.handled[s.id] {
		w.mu.Unlock()
		return
	}
	w.handled[s.id] = true
	w.mu.Unlock()
	deliver := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if o, ok := obj.(client.Object); ok {
			s.deliver(o)
		}
	}
	for _, inf := range w.informers[s.kind] {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: deliver, UpdateFunc: func(_, o any) { deliver(o) }, DeleteFunc: deliver,
		})
	}
}
