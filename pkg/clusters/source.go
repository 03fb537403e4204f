package clusters

import (
	"context"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// sinkKind is what a started source receives.
type sinkKind int

const (
	// sinkObjects receives the objects of one Watch, from every secondary.
	sinkObjects sinkKind = iota
	// sinkClusterChanges receives cluster-state changes (ClusterSource).
	sinkClusterChanges
	// sinkWatchStarts receives a cluster's name when its informer of one Watch (re)started and synced.
	sinkWatchStarts
)

// sink is where one started source receives what it asked for. Its deliver only adds to a work
// queue: it never blocks and, since a queue coalesces, never drops.
type sink struct {
	id      int
	kind    sinkKind
	watch   string // the Watch's name (sinkObjects, sinkWatchStarts)
	deliver func(client.Object)
	// news, when set, says whether an object added (old nil) or changed is worth delivering
	// (sinkObjects); deletions are always delivered.
	news    func(old, obj client.Object) bool
	stopped atomic.Bool
}

// Source is a controller-runtime source of the objects of w in every usable secondary, present
// and future: add, update and delete all reach h as generic events. Declare it in
// SetupWithManager with WatchesRawSource; it starts with the controller, so only the leader
// receives events, and its start makes every secondary's informer of w start.
func (r *Registry) Source(w Watch, h handler.EventHandler) source.Source {
	return &remoteSource{registry: r, kind: sinkObjects, watch: &w, handler: h, name: w.Name}
}

// FilteredSource is Source, with only the additions (old nil) and changes news says are worth a
// look: a controller that decides nothing from most of an object's updates is not woken by them.
// Deletions always reach h.
func (r *Registry) FilteredSource(w Watch, h handler.EventHandler, news func(old, obj client.Object) bool) source.Source {
	return &remoteSource{registry: r, kind: sinkObjects, watch: &w, handler: h, name: w.Name + " (filtered)", news: news}
}

// StartSource is a source of "this secondary's informer of w (re)started and synced": an object
// named after the cluster, once per start, and for every synced cluster when the source starts.
// Whatever happened there while nothing watched (objects deleted while the secondary was
// unregistered or unreachable) shows in no event: a controller that must check its objects
// against the live list then (the proxy reconciler) watches this.
func (r *Registry) StartSource(w Watch, h handler.EventHandler) source.Source {
	return &remoteSource{registry: r, kind: sinkWatchStarts, watch: &w, handler: h, name: "starts of " + w.Name}
}

// ClusterSource is a source of cluster-state changes: an object named after the cluster whose
// snapshot changed, or that was added or removed; the name "" when the registration itself
// changed (parsed, unparsable, first read). Every cluster is announced once when it starts.
func (r *Registry) ClusterSource(h handler.EventHandler) source.Source {
	return &remoteSource{registry: r, kind: sinkClusterChanges, handler: h, name: "cluster changes"}
}

// remoteSource is one of the registry's sources.
type remoteSource struct {
	registry *Registry
	kind     sinkKind
	watch    *Watch
	handler  handler.EventHandler
	name     string
	news     func(old, obj client.Object) bool
}

var _ source.Source = (*remoteSource)(nil)

// Start declares the source's Watch and registers its sink until ctx ends.
func (s *remoteSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	sk := &sink{kind: s.kind, news: s.news}
	sk.deliver = func(o client.Object) {
		if !sk.stopped.Load() {
			s.handler.Generic(ctx, event.GenericEvent{Object: o}, q)
		}
	}
	if s.watch != nil {
		sk.watch = s.watch.Name
		s.registry.declare(*s.watch)
	}
	s.registry.addSink(sk)
	go func() {
		<-ctx.Done()
		sk.stopped.Store(true)
		s.registry.removeSink(sk)
	}()
	return nil
}

func (s *remoteSource) String() string { return "registry source of " + s.name }

// declare adds a Watch to those every watched secondary runs, and starts it in each.
func (r *Registry) declare(w Watch) {
	r.mu.Lock()
	if _, ok := r.watches[w.Name]; ok {
		r.mu.Unlock()
		return
	}
	r.watches[w.Name] = w
	r.watchOrder = append(r.watchOrder, w.Name)
	all := r.clusterList()
	r.mu.Unlock()
	for _, c := range all {
		if rw := c.remoteWatch(); rw != nil {
			if _, err := rw.ensure(w); err != nil {
				r.log.Error(err, "Cannot watch a secondary", "cluster", c.name, "watch", w.Name)
			}
		}
	}
}

// declared is every Watch declared so far, in the order they were.
func (r *Registry) declared() []Watch {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Watch, 0, len(r.watchOrder))
	for _, n := range r.watchOrder {
		out = append(out, r.watches[n])
	}
	return out
}

// clusterList is every cluster; r.mu is held.
func (r *Registry) clusterList() []*cluster {
	all := make([]*cluster, 0, len(r.clusters))
	for _, c := range r.clusters {
		all = append(all, c)
	}
	return all
}

// addSink registers a sink and gives it what exists: the informers of every watched secondary
// (which replay their objects to a new handler), the clusters whose informer synced, or every
// cluster's name.
func (r *Registry) addSink(s *sink) {
	r.mu.Lock()
	r.nextSink++
	s.id = r.nextSink
	r.sinks = append(r.sinks, s)
	all := r.clusterList()
	r.mu.Unlock()
	switch s.kind {
	case sinkWatchStarts:
		for _, c := range all {
			if rw := c.remoteWatch(); rw != nil {
				if x, ok := rw.get(s.watch); ok && x.informer.HasSynced() {
					s.deliver(clusterObject(c.name))
				}
			}
		}
	case sinkClusterChanges:
		s.deliver(clusterObject(""))
		for _, c := range all {
			s.deliver(clusterObject(c.name))
		}
	default:
		for _, c := range all {
			if rw := c.remoteWatch(); rw != nil {
				rw.attach(s)
			}
		}
	}
}

func (r *Registry) removeSink(s *sink) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, x := range r.sinks {
		if x == s {
			r.sinks = append(r.sinks[:i], r.sinks[i+1:]...)
			return
		}
	}
}

// objectSinks are the sinks a newly started remote watch must feed.
func (r *Registry) objectSinks() []*sink {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*sink
	for _, s := range r.sinks {
		if s.kind == sinkObjects {
			out = append(out, s)
		}
	}
	return out
}

// notify tells the change sinks that a cluster's snapshot changed ("" for the registration).
func (r *Registry) notify(name string) { r.notifyKind(sinkClusterChanges, "", name) }

// notifyKind tells the sinks of one kind (and Watch, for watch starts) about a cluster.
func (r *Registry) notifyKind(kind sinkKind, watch, name string) {
	r.mu.Lock()
	var out []*sink
	for _, s := range r.sinks {
		if s.kind == kind && s.watch == watch {
			out = append(out, s)
		}
	}
	r.mu.Unlock()
	for _, s := range out {
		s.deliver(clusterObject(name))
	}
}

// clusterObject stands for a cluster in a change event.
func clusterObject(name string) client.Object {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}
}
