package clusters

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/flotilla-dev/flotilla/internal/resourcelists"
)

// capacityRecomputeInterval bounds how often a secondary's capacity is recomputed while its pods churn.
const capacityRecomputeInterval = 2 * time.Second

// capacityWatch keeps a secondary's nodes and pods in slim informers and its Capacity up to date.
type capacityWatch struct {
	cancel context.CancelFunc
	nodes  cache.SharedIndexInformer
	pods   cache.SharedIndexInformer
	// failed is set when a list or watch of its informers fails (reflectorFailed).
	failed atomic.Bool

	mu        sync.Mutex
	dirty     bool
	synced    bool
	last      Capacity
	announced Capacity // what subscribers were last told of
}

// nonTerminalPods selects the pods that take room on a node: a secondary's finished pods (a
// CronJob's history, evicted pods) are never listed or kept, so what the watch holds is bounded by
// what its nodes can run, not by what ever ran there.
const nonTerminalPods = "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)

func startCapacityWatch(ctx context.Context, cs kubernetes.Interface, primaryID string, changed func()) *capacityWatch {
	ctx, cancel := context.WithCancel(ctx)
	slim := &capacitySlim{primaryID: primaryID}
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(slim.transform))
	podFactory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(slim.transform),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = nonTerminalPods }))
	w := &capacityWatch{cancel: cancel, nodes: nodeFactory.Core().V1().Nodes().Informer(), pods: podFactory.Core().V1().Pods().Informer(), dirty: true}
	for _, inf := range []cache.SharedIndexInformer{w.nodes, w.pods} {
		_ = inf.SetWatchErrorHandler(func(r *cache.Reflector, err error) {
			w.failed.Store(true)
			cache.DefaultWatchErrorHandler(ctx, r, err)
		})
	}
	mark := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.markDirty() },
		UpdateFunc: func(any, any) { w.markDirty() },
		DeleteFunc: func(any) { w.markDirty() },
	}
	_, _ = w.nodes.AddEventHandler(mark)
	_, _ = w.pods.AddEventHandler(mark)
	nodeFactory.Start(ctx.Done())
	podFactory.Start(ctx.Done())
	go w.loop(ctx, changed, nodeFactory, podFactory)
	return w
}

// reflectorFailed says whether a list or watch of this watch failed since it started: only then
// is it worth restarting (a fresh informer lists at once, a failed one backs off up to a minute).
func (w *capacityWatch) reflectorFailed() bool { return w.failed.Load() }

func (w *capacityWatch) markDirty() {
	w.mu.Lock()
	w.dirty = true
	w.mu.Unlock()
}

// loop recomputes at most every capacityRecomputeInterval, and calls changed when the result moved
// by more than 1 % or the node count changed.
func (w *capacityWatch) loop(ctx context.Context, changed func(), factories ...informers.SharedInformerFactory) {
	defer func() {
		for _, f := range factories {
			f.Shutdown()
		}
	}()
	if !cache.WaitForCacheSync(ctx.Done(), w.nodes.HasSynced, w.pods.HasSynced) {
		return
	}
	ticker := time.NewTicker(capacityRecomputeInterval)
	defer ticker.Stop()
	nodeLister := corev1Lister{w.nodes.GetIndexer()}
	podLister := corev1Lister{w.pods.GetIndexer()}
	for {
		w.mu.Lock()
		dirty := w.dirty
		w.dirty = false
		w.mu.Unlock()
		if dirty {
			c := ComputeCapacity(nodeLister.nodes(), podLister.usages())
			w.mu.Lock()
			a := w.announced
			moved := !w.synced || c.NodeCount != a.NodeCount || c.EligibleNodes != a.EligibleNodes ||
				ChangedMoreThan(a.Capacity, c.Capacity, 0.01) || ChangedMoreThan(a.Allocatable, c.Allocatable, 0.01) ||
				c.OS != a.OS || c.Arch != a.Arch || c.Region != a.Region || c.Zone != a.Zone
			if moved {
				w.announced = c
			}
			// The latest always serves (node frees for the webhook); only a move is announced.
			w.last = c
			w.synced = true
			w.mu.Unlock()
			if moved {
				changed()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (w *capacityWatch) current() (Capacity, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, w.synced
}

func (w *capacityWatch) stop() { w.cancel() }

type corev1Lister struct{ store cache.Store }

func (l corev1Lister) nodes() []*corev1.Node {
	var out []*corev1.Node
	for _, o := range l.store.List() {
		if n, ok := o.(*corev1.Node); ok {
			out = append(out, n)
		}
	}
	return out
}

func (l corev1Lister) usages() []PodUsage {
	var out []PodUsage
	for _, o := range l.store.List() {
		if r, ok := o.(*podRecord); ok {
			out = append(out, r.PodUsage)
		}
	}
	return out
}

// podRecord is what the capacity watch keeps of a pod: the metadata its informer keys and
// compares by (name, namespace, UID, resourceVersion) and its usage. About 300 bytes where a
// *corev1.Pod, even emptied, takes 1.2 KiB, for every pod of every secondary.
type podRecord struct {
	metav1.ObjectMeta
	PodUsage
}

// capacitySlim is the capacity watch's transform: each pod becomes a podRecord, its requests a
// list shared with the other pods that request the same, and each node keeps what capacity and
// the webhook's feasibility check read.
type capacitySlim struct {
	primaryID string
}

func (s *capacitySlim) transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		r := &podRecord{PodUsage: UsageOf(o, s.primaryID)}
		r.Name, r.Namespace, r.UID, r.ResourceVersion = o.Name, o.Namespace, o.UID, o.ResourceVersion
		r.Requests = resourcelists.Share(r.Requests)
		return r, nil
	case *corev1.Node:
		n := &corev1.Node{}
		n.Name, n.UID, n.ResourceVersion, n.Labels = o.Name, o.UID, o.ResourceVersion, o.Labels
		n.Spec.Unschedulable, n.Spec.Taints = o.Spec.Unschedulable, o.Spec.Taints
		n.Status.Allocatable = o.Status.Allocatable
		for _, c := range o.Status.Conditions {
			if c.Type == corev1.NodeReady {
				n.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
			}
		}
		return n, nil
	default:
		return obj, nil
	}
}
