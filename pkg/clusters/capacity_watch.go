package clusters

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
)

// capacityRecomputeInterval bounds how often a secondary's capacity is recomputed while its pods churn.
const capacityRecomputeInterval = 2 * time.Second

// capacityWatch keeps a secondary's nodes and pods in slim informers and its Capacity up to date.
type capacityWatch struct {
	cancel context.CancelFunc
	nodes  cache.SharedIndexInformer
	pods   cache.SharedIndexInformer

	mu        sync.Mutex
	dirty     bool
	synced    bool
	last      Capacity
	announced Capacity // what subscribers were last told of
}

func startCapacityWatch(ctx context.Context, cs kubernetes.Interface, primaryID string, changed func()) *capacityWatch {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(slim))
	w := &capacityWatch{cancel: cancel, nodes: factory.Core().V1().Nodes().Informer(), pods: factory.Core().V1().Pods().Informer(), dirty: true}
	mark := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.markDirty() },
		UpdateFunc: func(any, any) { w.markDirty() },
		DeleteFunc: func(any) { w.markDirty() },
	}
	_, _ = w.nodes.AddEventHandler(mark)
	_, _ = w.pods.AddEventHandler(mark)
	factory.Start(ctx.Done())
	go w.loop(ctx, factory, primaryID, changed)
	return w
}

func (w *capacityWatch) markDirty() {
	w.mu.Lock()
	w.dirty = true
	w.mu.Unlock()
}

// loop recomputes at most every capacityRecomputeInterval, and calls changed when the result moved
// by more than 1 % or the node count changed.
func (w *capacityWatch) loop(ctx context.Context, factory informers.SharedInformerFactory, primaryID string, changed func()) {
	defer factory.Shutdown()
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
			c := ComputeCapacity(nodeLister.nodes(), podLister.pods(), primaryID)
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

func (l corev1Lister) pods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, o := range l.store.List() {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// slim keeps only what capacity needs, so a secondary with many pods costs little memory.
func slim(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		p := &corev1.Pod{}
		p.Name, p.Namespace, p.UID, p.ResourceVersion = o.Name, o.Namespace, o.UID, o.ResourceVersion
		p.Labels = o.Labels
		p.Spec.NodeName = o.Spec.NodeName
		// What the pod takes of its node, worked out once here rather than kept as it came (every
		// container's requests and limits, the init containers', the overhead): one list per
		// pod, as one container's requests, which ComputeCapacity reads back unchanged.
		if req := resourcehelper.PodRequests(o, resourcehelper.PodResourcesOptions{}); len(req) > 0 {
			p.Spec.Containers = []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: req}}}
		}
		p.Status.Phase = o.Status.Phase
		return p, nil
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
