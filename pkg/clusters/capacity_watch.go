package clusters

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/flotilla-dev/flotilla/internal/resourcelists"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

// deviceProbeTimeout bounds the list that tells whether a secondary's devices can be watched.
const deviceProbeTimeout = 10 * time.Second

// capacityRecomputeInterval bounds how often a secondary's capacity is recomputed while its pods churn.
const capacityRecomputeInterval = 2 * time.Second

// capacityWatch keeps a secondary's nodes in a slim informer, records of its pods (podRecords,
// bounded by what its nodes can run) and its Capacity up to date.
type capacityWatch struct {
	cancel  context.CancelFunc
	log     logr.Logger
	nodes   cache.SharedIndexInformer
	pods    *podRecords
	podsCtl cache.Controller
	// cs and onError start the device watch once the nodes are listed (startDevices).
	cs      kubernetes.Interface
	onError cache.WatchErrorHandlerWithContext
	started time.Time
	// failed is set when a list or watch of its informers fails (reflectorFailed).
	failed atomic.Bool

	mu        sync.Mutex
	dirty     bool
	synced    bool
	last      Capacity
	announced Capacity // what subscribers were last told of
}

func startCapacityWatch(ctx context.Context, log logr.Logger, cs kubernetes.Interface, primaryID string, changed func()) *capacityWatch {
	ctx, cancel := context.WithCancel(ctx)
	slim := &capacitySlim{primaryID: primaryID}
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(slim.transform))
	w := &capacityWatch{cancel: cancel, log: log, nodes: nodeFactory.Core().V1().Nodes().Informer(), started: time.Now(), dirty: true, cs: cs}
	onError := func(ctx context.Context, r *cache.Reflector, err error) {
		w.failed.Store(true)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}
	w.onError = onError
	_ = w.nodes.SetWatchErrorHandlerWithContext(onError)
	w.pods = newPodRecords(func() int { return podRecordLimit(corev1Lister{w.nodes.GetIndexer()}.nodes()) })
	w.podsCtl = newPodsController(cs, slim, w.pods, w.markDirty, onError)
	mark := func() {
		w.pods.nodesChanged.Store(true)
		w.markDirty()
	}
	_, _ = w.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { mark() },
		UpdateFunc: func(any, any) { mark() },
		DeleteFunc: func(any) { mark() },
	})
	nodeFactory.Start(ctx.Done())
	go w.loop(ctx, changed, nodeFactory)
	return w
}

// reflectorFailed says whether a list or watch of this watch failed since it started: only then
// is it worth restarting (a fresh informer lists at once, a failed one backs off up to a minute).
func (w *capacityWatch) reflectorFailed() bool { return w.failed.Load() }

// relistDue says whether the watch refused pods for lack of room and is old enough to be
// restarted: a new one lists the secondary's pods again, and finds whether they fit now (those
// refused and never changed since would otherwise be missed for ever).
func (w *capacityWatch) relistDue(now time.Time) bool {
	if w.pods == nil {
		return false
	}
	after, ok := relistAfter(w.pods.overLimit())
	return ok && now.Sub(w.started) >= after
}

func (w *capacityWatch) markDirty() {
	w.mu.Lock()
	w.dirty = true
	w.mu.Unlock()
}

// loop starts the pods' records once the nodes are listed (their limit is read from the nodes),
// then recomputes at most every capacityRecomputeInterval, and calls changed when the result
// moved by more than 1 % or the node count changed.
func (w *capacityWatch) loop(ctx context.Context, changed func(), nodeFactory informers.SharedInformerFactory) {
	defer nodeFactory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), w.nodes.HasSynced) {
		return
	}
	go w.podsCtl.RunWithContext(ctx)
	devices := w.startDevices(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), w.podsCtl.HasSynced) {
		return
	}
	ticker := time.NewTicker(capacityRecomputeInterval)
	defer ticker.Stop()
	nodeLister := corev1Lister{w.nodes.GetIndexer()}
	for {
		w.mu.Lock()
		dirty := w.dirty
		w.dirty = false
		w.mu.Unlock()
		if dirty {
			c := ComputeCapacity(nodeLister.nodes(), w.pods.usages())
			c.Devices = devices.view()
			c.DeviceCounts = placement.CountDevices(ctx, c.Devices)
			if over, held, limit := w.pods.overLimit(); over {
				c = c.withoutRoom()
				if !w.last.PodsOverLimit {
					w.log.Info("Secondary has more pods bound to nodes than the manager keeps records of: its capacity "+
						"offers nothing until a list of its pods finds them within the limit", "held", held, "limit", limit,
						"relistIn", podRecordsRelistInterval.String())
				}
			}
			w.mu.Lock()
			a := w.announced
			moved := !w.synced || movedFrom(a, c)
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

// startDevices probes and starts the secondary's device watch (bounded by deviceProbeTimeout),
// and says once when its devices cannot be known.
func (w *capacityWatch) startDevices(ctx context.Context) *deviceWatch {
	pctx, cancel := context.WithTimeout(ctx, deviceProbeTimeout)
	defer cancel()
	devices := startDeviceWatch(pctx, ctx, w.cs, w.markDirty, w.onError)
	if devices.unknown != "" {
		w.log.Info("Secondary's devices (DRA) are not known: pods that claim devices do not go there", "reason", devices.unknown)
	}
	return devices
}

// movedFrom says whether capacity c is worth announcing after a: the node counts, a resource by
// more than 1 %, the nodes' common labels, the pods' limit, or the devices per class changed.
func movedFrom(a, c Capacity) bool {
	return c.NodeCount != a.NodeCount || c.EligibleNodes != a.EligibleNodes ||
		ChangedMoreThan(a.Capacity, c.Capacity, 0.01) || ChangedMoreThan(a.Allocatable, c.Allocatable, 0.01) ||
		c.OS != a.OS || c.Arch != a.Arch || c.Region != a.Region || c.Zone != a.Zone || c.PodsOverLimit != a.PodsOverLimit ||
		!slices.Equal(c.DeviceCounts, a.DeviceCounts)
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
