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

// sink is where one started source receives the objects of its kind, from every secondary. Its
// deliver only adds to a work queue: it never blocks and, since a queue coalesces, never drops.
type sink struct {
	id      int
	kind    remoteKind
	changes bool // cluster-state changes instead of objects
	deliver func(client.Object)
	stopped atomic.Bool
}

// DelegateSource is a controller-runtime source of this primary's delegates in every usable
// secondary, present and future: add, update and delete all reach h as generic events (a
// delegate has the namespace and name of its proxy). Declare it in SetupWithManager with
// WatchesRawSource; it starts with the controller, so only the leader receives events.
func (r *Registry) DelegateSource(h handler.EventHandler) source.Source {
	return &remoteSource{registry: r, kind: remoteDelegates, handler: h, name: "delegates"}
}

// ReplicaSource is a source of the objects this primary's Replicators applied in every usable
// secondary (label flotilla.dev/replicator holds the Replicator's label value).
func (r *Registry) ReplicaSource(h handler.EventHandler) source.Source {
	return &remoteSource{registry: r, kind: remoteReplicas, handler: h, name: "replicated objects"}
}

// ClusterSource is a source of cluster-state changes: an object named after the cluster whose
// snapshot changed, or that was added or removed; the name "" when the registration itself
// changed (parsed, unparsable, first read). Every cluster is announced once when it starts.
func (r *Registry) ClusterSource(h handler.EventHandler) source.Source {
	return &remoteSource{registry: r, kind: remoteChanges, changes: true, handler: h, name: "cluster changes"}
}

// WatchStartSource is a source of "this secondary's delegate informer (re)started and synced":
// an object named after the cluster, once per start, and for every synced cluster when the source
// starts. Whatever happened there while nothing watched (delegates deleted while the secondary was
// unregistered or unreachable) shows in no event: a controller that must check its objects
// against the live list then (the proxy reconciler) watches this.
func (r *Registry) WatchStartSource(h handler.EventHandler) source.Source {
	return &remoteSource{registry: r, kind: remoteWatchStarts, changes: true, handler: h, name: "informer starts"}
}

// remoteSource is one of the registry's sources.
type remoteSource struct {
	registry *Registry
	kind     remoteKind
	changes  bool
	handler  handler.EventHandler
	name     string
}

var _ source.Source = (*remoteSource)(nil)

// Start registers the source's sink until ctx ends.
func (s *remoteSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	sk := &sink{kind: s.kind, changes: s.changes}
	sk.deliver = func(o client.Object) {
		if !sk.stopped.Load() {
			s.handler.Generic(ctx, event.GenericEvent{Object: o}, q)
		}
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

// addSink registers a sink and gives it what exists: the informers of every watched secondary
// (which replay their objects to a new handler), or every cluster's name.
func (r *Registry) addSink(s *sink) {
	r.mu.Lock()
	r.nextSink++
	s.id = r.nextSink
	r.sinks = append(r.sinks, s)
	all := make([]*cluster, 0, len(r.clusters))
	names := make([]string, 0, len(r.clusters))
	for name, c := range r.clusters {
		all = append(all, c)
		names = append(names, name)
	}
	r.mu.Unlock()
	if s.changes && s.kind == remoteWatchStarts {
		for _, c := range all {
			if w := c.remoteWatch(); w != nil && w.delegates.HasSynced() {
				s.deliver(clusterObject(c.name))
			}
		}
		return
	}
	if s.changes {
		s.deliver(clusterObject(""))
		for _, n := range names {
			s.deliver(clusterObject(n))
		}
		return
	}
	for _, c := range all {
		if w := c.remoteWatch(); w != nil {
			w.attach(s)
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
		if !s.changes {
			out = append(out, s)
		}
	}
	return out
}

// notify tells the change sinks that a cluster's snapshot changed ("" for the registration).
func (r *Registry) notify(name string) { r.notifyKind(remoteChanges, name) }

// notifyKind tells the change sinks of one kind about a cluster.
func (r *Registry) notifyKind(kind remoteKind, name string) {
	r.mu.Lock()
	var out []*sink
	for _, s := range r.sinks {
		if s.changes && s.kind == kind {
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
