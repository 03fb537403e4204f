package clusters

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// boundPods selects the pods that take room on a node: bound to one (spec.nodeName set), and not
// finished (Succeeded or Failed). A secondary's unschedulable pods, its CronJobs' history and its
// evicted pods are never listed nor kept. Every API server supports both fields in a pods field
// selector; the terms are ANDed.
const boundPods = "spec.nodeName!=,status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)

const (
	// podRecordsSlack is what a secondary's pod records may hold beyond its nodes' pod allocatable:
	// pods bound before their node is seen, or bound by hand to a node the kubelet has not
	// admitted them on yet or that is gone (the pod garbage collector deletes those).
	podRecordsSlack = 1000
	// maxPodRecords bounds a secondary's pod records whatever its nodes claim: Kubernetes' own
	// scalability limit of 150,000 pods a cluster, about 43 MiB of records.
	maxPodRecords = 150_000
	// podRecordsRelistInterval is how long a capacity watch over the limit waits before it lists
	// the secondary's pods again (the pods it did not keep may be gone by then).
	podRecordsRelistInterval = 5 * time.Minute
	// podRecordsRelistSoon is how long it waits instead once deletions brought what it holds
	// under 90 % of its limit: the pods it refused are likely going too (a namespace or a
	// workload deleted), and the secondary should not offer nothing for minutes after.
	podRecordsRelistSoon = 30 * time.Second
)

// relistAfter is how old a capacity watch that refused pods must be before it lists them again:
// podRecordsRelistSoon once what it holds fell under 90 % of its limit, else
// podRecordsRelistInterval. ok is false for a watch that refused none.
func relistAfter(over bool, held, limit int) (after time.Duration, ok bool) {
	switch {
	case !over:
		return 0, false
	case held*10 < limit*9:
		return podRecordsRelistSoon, true
	default:
		return podRecordsRelistInterval, true
	}
}

// podRecordLimit is how many pod records a secondary's capacity watch keeps: what its nodes can
// run (the sum of their allocatable "pods", 110 a node by default, whatever their state, since
// their pods are kept too) and podRecordsSlack, at most maxPodRecords.
func podRecordLimit(nodes []*corev1.Node) int {
	limit := podRecordsSlack
	for _, n := range nodes {
		pods := n.Status.Allocatable[corev1.ResourcePods]
		if v := pods.Value(); v > 0 {
			limit += int(min(v, maxPodRecords))
		}
		if limit >= maxPodRecords {
			return maxPodRecords
		}
	}
	return limit
}

// podAdmission is what becomes of a pod offered to a secondary's pod records.
type podAdmission int

const (
	// admitPod keeps (or updates) its record.
	admitPod podAdmission = iota
	// ignorePod keeps no record: a pod bound to no node takes room nowhere.
	ignorePod
	// refusePod keeps no record though the pod takes room: the records are full.
	refusePod
)

// admitPodRecord decides whether a pod's record is kept: a pod bound to no node never (the field
// selector leaves those out already); one whose record is held always (updated in place, it holds
// no more); another while fewer than limit are held.
func admitPodRecord(bound, held bool, count, limit int) podAdmission {
	switch {
	case !bound:
		return ignorePod
	case held || count < limit:
		return admitPod
	default:
		return refusePod
	}
}

// podRecords is a secondary's pod records, at most its podRecordLimit: the store a capacity
// watch's pods controller fills, and what its reflector's relists compare with (ListKeys,
// GetByKey). A pod refused for lack of room makes the records incomplete until the next list.
type podRecords struct {
	// limitOf reads the limit from the nodes, again after nodesChanged.
	limitOf      func() int
	nodesChanged atomic.Bool

	mu      sync.RWMutex
	byKey   map[string]*podRecord
	limit   int
	refused int // pods refused since the records were started
}

func newPodRecords(limitOf func() int) *podRecords {
	s := &podRecords{limitOf: limitOf, byKey: map[string]*podRecord{}}
	s.nodesChanged.Store(true)
	return s
}

// ListKeys is the keys of the records held (cache.KeyLister).
func (s *podRecords) ListKeys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	keys := make([]string, 0, len(s.byKey))
	for k := range s.byKey {
		keys = append(keys, k)
	}
	return keys
}

// GetByKey is the record held for a key (cache.KeyGetter).
func (s *podRecords) GetByKey(key string) (any, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.byKey[key]
	if !ok {
		return nil, false, nil
	}
	return r, true, nil
}

// apply applies one change of a pod (its record, made by capacitySlim.transform) and says whether
// the capacity may have changed.
func (s *podRecords) apply(d cache.Delta) bool {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(d.Object)
	if err != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, held := s.byKey[key]
	if d.Type == cache.Deleted {
		delete(s.byKey, key)
		return held
	}
	r, ok := d.Object.(*podRecord)
	if !ok {
		return false
	}
	if s.nodesChanged.Swap(false) {
		s.limit = s.limitOf()
	}
	switch admitPodRecord(r.NodeName != "", held, len(s.byKey), s.limit) {
	case admitPod:
		s.byKey[key] = r
		return true
	case refusePod:
		s.refused++
		return s.refused == 1
	default:
		delete(s.byKey, key)
		return held
	}
}

// usages are the usages of the pods held.
func (s *podRecords) usages() []PodUsage {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]PodUsage, 0, len(s.byKey))
	for _, r := range s.byKey {
		out = append(out, r.PodUsage)
	}
	return out
}

// overLimit says whether a pod that takes room was refused: what the pods take is then not known.
func (s *podRecords) overLimit() (over bool, held, limit int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.refused > 0, len(s.byKey), s.limit
}

// newPodsController makes the controller that keeps records of a secondary's bound, unfinished
// pods (boundPods) in records; changed is called when the capacity may have moved. A client-go
// informer keeps every object it lists: this one keeps what records admits.
func newPodsController(cs kubernetes.Interface, slim *capacitySlim, records *podRecords, changed func(),
	onError cache.WatchErrorHandlerWithContext) cache.Controller {
	tweak := func(o *metav1.ListOptions) { o.FieldSelector = boundPods }
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			return cs.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, o)
		},
	}, cs)
	fifo := cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{KnownObjects: records, Transformer: slim.transform})
	return cache.New(&cache.Config{
		Queue:         fifo,
		ListerWatcher: lw,
		ObjectType:    &corev1.Pod{},
		Process: func(obj any, _ bool) error {
			moved := false
			for _, d := range obj.(cache.Deltas) {
				moved = records.apply(d) || moved
			}
			if moved {
				changed()
			}
			return nil
		},
		WatchErrorHandlerWithContext: onError,
	})
}

// withoutRoom is a capacity whose pods are not all known: its nodes' capacity stands, but nothing
// is offered (Allocatable and every node's Free are zero), rather than room that may be taken.
func (c Capacity) withoutRoom() Capacity {
	c.PodsOverLimit = true
	c.Allocatable = zeroed(c.Allocatable)
	nodes := make([]NodeCapacity, len(c.Nodes))
	for i, n := range c.Nodes {
		n.Free = zeroed(n.Free)
		nodes[i] = n
	}
	c.Nodes = nodes
	return c
}

// zeroed is list with every quantity zero.
func zeroed(list corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range list {
		out[name] = *resource.NewQuantity(0, q.Format)
	}
	return out
}
