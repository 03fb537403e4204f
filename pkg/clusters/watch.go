package clusters

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Watch is a kind of objects a controller follows in every usable secondary: one label-selected
// informer per secondary for everyone who asks for it, started on the leader while the secondary
// answers, restarted with the secondary's other informers when it comes back. The controller that
// declares it owns the shape of its cache (Transform) and what is kept beside it (Track); the
// registry only connects.
type Watch struct {
	// Name identifies the watch: one informer per secondary per name.
	Name string
	// Object is an empty object of the kind, of a type in the registry's scheme.
	Object client.Object
	// Selector is the label selector of the objects to follow, given this primary's ID.
	Selector func(primaryID string) string
	// Transform is what the cache keeps of each object (nil: all but its managedFields).
	Transform cache.TransformFunc
	// Track, when set, is given the informer before it lists and returns what the watch keeps
	// beside it (an event handler's memory, say), read back with Secondary.Cached.
	Track func(cache.SharedIndexInformer) any
	// OnDelete, when set, is told of each deletion (the object, or the tombstone of one gone in a
	// relist) with what Track returned, by each source of the watch just before its handler gets
	// it: what it records is there when a controller handles the deletion (an informer's handlers
	// each run on their own goroutine, so one of Track's own could come after).
	OnDelete func(tracked, obj any)
}

// dropManagedFields is a watch's default transform: managedFields are never read back.
func dropManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// remoteWatch is one secondary's informers that controllers follow through sources, one per
// declared Watch. Every source's handler is added to its watch's informer once (handled), and a
// handler added late is replayed what the informer holds.
type remoteWatch struct {
	ctx       context.Context
	cancel    context.CancelFunc
	client    client.WithWatch
	primaryID string
	// failed is set when a list or watch of its informers fails (reflectorFailed).
	failed atomic.Bool
	// synced is called once a watch's informer synced after it (re)started.
	synced func(watch string)

	mu      sync.Mutex
	watches map[string]*watched
	handled map[int]bool
}

// watched is the informer of one Watch in one secondary and what the Watch keeps beside it.
type watched struct {
	informer cache.SharedIndexInformer
	tracked  any
	onDelete func(tracked, obj any)
}

// startRemoteWatch prepares a secondary's informers; ensure starts one per Watch, cancel stops them.
func startRemoteWatch(ctx context.Context, c client.WithWatch, primaryID string, synced func(string)) *remoteWatch {
	ctx, cancel := context.WithCancel(ctx)
	return &remoteWatch{ctx: ctx, cancel: cancel, client: c, primaryID: primaryID, synced: synced,
		watches: map[string]*watched{}, handled: map[int]bool{}}
}

// ensure starts the informer of w in this secondary unless it runs already.
func (rw *remoteWatch) ensure(w Watch) (*watched, error) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if x, ok := rw.watches[w.Name]; ok {
		return x, nil
	}
	if rw.ctx.Err() != nil {
		return nil, fmt.Errorf("the informers of this secondary are stopped: %w", rw.ctx.Err())
	}
	inf, err := rw.newInformer(w)
	if err != nil {
		return nil, err
	}
	x := &watched{informer: inf, onDelete: w.OnDelete}
	if w.Track != nil {
		x.tracked = w.Track(inf)
	}
	rw.watches[w.Name] = x
	go inf.RunWithContext(rw.ctx)
	go func() {
		if cache.WaitForCacheSync(rw.ctx.Done(), inf.HasSynced) {
			rw.synced(w.Name)
		}
	}()
	return x, nil
}

// newInformer is an informer of w's kind and selector, through the secondary's watch client.
func (rw *remoteWatch) newInformer(w Watch) (cache.SharedIndexInformer, error) {
	gvk, err := apiutil.GVKForObject(w.Object, rw.client.Scheme())
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", w.Name, err)
	}
	gvk.Kind += "List"
	newList := func() (client.ObjectList, error) {
		o, err := rw.client.Scheme().New(gvk)
		if err != nil {
			return nil, fmt.Errorf("watch %s: %w", w.Name, err)
		}
		l, ok := o.(client.ObjectList)
		if !ok {
			return nil, fmt.Errorf("watch %s: %s is not a list", w.Name, gvk)
		}
		return l, nil
	}
	if _, err := newList(); err != nil {
		return nil, err
	}
	selector := w.Selector(rw.primaryID)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			l, err := newList()
			if err != nil {
				return nil, err
			}
			opts.LabelSelector = selector
			return l, rw.client.List(ctx, l, &client.ListOptions{Raw: &opts})
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			l, err := newList()
			if err != nil {
				return nil, err
			}
			opts.LabelSelector = selector
			return rw.client.Watch(ctx, l, &client.ListOptions{Raw: &opts})
		},
	}
	inf := cache.NewSharedIndexInformerWithOptions(lw, w.Object.DeepCopyObject(), cache.SharedIndexInformerOptions{
		Indexers:          cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		ObjectDescription: w.Name,
	})
	transform := w.Transform
	if transform == nil {
		transform = dropManagedFields
	}
	if err := inf.SetTransform(transform); err != nil {
		return nil, fmt.Errorf("watch %s: %w", w.Name, err)
	}
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		rw.failed.Store(true)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return nil, fmt.Errorf("watch %s: %w", w.Name, err)
	}
	return inf, nil
}

// get is the informer of a watch, if started.
func (rw *remoteWatch) get(name string) (*watched, bool) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	x, ok := rw.watches[name]
	return x, ok
}

// reflectorFailed says whether a list or watch of these informers failed since they started.
func (rw *remoteWatch) reflectorFailed() bool { return rw.failed.Load() }

// attach adds a sink's handler to its watch's informer, once. client-go runs each handler on a
// goroutine of its own with an unbounded buffer; the handlers only add to a work queue, which
// never blocks and coalesces, so no informer ever waits and no event is dropped.
func (rw *remoteWatch) attach(s *sink) {
	x, ok := rw.get(s.watch)
	if !ok {
		return
	}
	rw.mu.Lock()
	if rw.handled[s.id] {
		rw.mu.Unlock()
		return
	}
	rw.handled[s.id] = true
	rw.mu.Unlock()
	deliver := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if o, ok := obj.(client.Object); ok {
			s.deliver(o)
		}
	}
	worth := func(old, obj any) bool {
		if s.news == nil {
			return true
		}
		o, _ := old.(client.Object)
		n, ok := obj.(client.Object)
		return !ok || s.news(o, n)
	}
	_, _ = x.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if worth(nil, o) {
				deliver(o)
			}
		},
		UpdateFunc: func(old, o any) {
			if worth(old, o) {
				deliver(o)
			}
		},
		DeleteFunc: func(o any) {
			if x.onDelete != nil {
				x.onDelete(x.tracked, o)
			}
			deliver(o)
		},
	})
}
