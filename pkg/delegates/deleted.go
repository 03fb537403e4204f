package delegates

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// deletedDelegatesKept is how long a delegate's deletion seen by the watch is remembered: longer
// than a burst of deletions takes to be handled, so its proxy is let go without a live read.
const deletedDelegatesKept = 2 * time.Minute

// deletedDelegates remembers the delegates the secondary's watch said were deleted, by the UID of
// their proxy. A watch's DELETED event proves the delegate is gone, as a live read would: the
// proxy controller then lets the proxy go without reading the secondary again. A delegate gone
// from a relist (a tombstone) is not remembered: that proof is left to a live read.
type deletedDelegates struct {
	mu     sync.Mutex
	byKey  map[string]deletedDelegate // "namespace/name"
	pruned time.Time
	now    func() time.Time
}

type deletedDelegate struct {
	proxyUID types.UID
	at       time.Time
}

func (d *deletedDelegates) clock() time.Time {
	if d.now != nil {
		return d.now()
	}
	return time.Now()
}

// onDelete records a deletion the delegate informer delivers (Watch.OnDelete).
func (d *deletedDelegates) onDelete(obj any) {
	pod, ok := obj.(*corev1.Pod) // a cache.DeletedFinalStateUnknown is not a watch's proof
	if !ok {
		return
	}
	// The informer is label-selected: a delegate whose flotilla.dev/primary label was removed
	// leaves it with a DELETED event too, carrying the pod as it is now (without the label), while
	// it still runs. Only a deletion's last state still carries the label.
	if _, labelled := pod.Labels[flotillav1.LabelPrimary]; !labelled {
		return
	}
	uid := types.UID(pod.Annotations[flotillav1.AnnotationProxyUID])
	if uid == "" {
		return
	}
	now := d.clock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byKey == nil {
		d.byKey = map[string]deletedDelegate{}
	}
	if now.Sub(d.pruned) >= deletedDelegatesKept {
		for k, v := range d.byKey {
			if now.Sub(v.at) >= deletedDelegatesKept {
				delete(d.byKey, k)
			}
		}
		d.pruned = now
	}
	d.byKey[pod.Namespace+"/"+pod.Name] = deletedDelegate{proxyUID: uid, at: now}
}

// seen says whether the watch said the delegate of this proxy (its namespace, name and UID) was
// deleted; the record is used up.
func (d *deletedDelegates) seen(namespace, name string, proxyUID types.UID) bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	key := namespace + "/" + name
	v, ok := d.byKey[key]
	if !ok || v.proxyUID != proxyUID || d.clock().Sub(v.at) >= deletedDelegatesKept {
		return false
	}
	delete(d.byKey, key)
	return true
}
