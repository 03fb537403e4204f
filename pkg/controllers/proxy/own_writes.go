package proxy

import (
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ownWrites remembers, per proxy, this reconciler's last write until the cache shows it.
//
// A delegate's next event often comes within milliseconds of the status write its last event
// caused, before the proxy's own watch event has reached the cache. A reconcile on that cache
// would decide again from the status before the write: write it a second time, or, for a proxy
// already let go, read the secondary and delete the proxy again. Under a burst that cost about
// one extra status patch per proxy, and a GET and a DELETE per deleted proxy.
type ownWrites struct {
	m sync.Map // types.NamespacedName -> ownWrite
}

type ownWrite struct {
	uid types.UID
	// before is the resourceVersion the write was made on: while the cache still shows it, the
	// cache has not seen the write.
	before string
	// after is what the API server answered (resourceVersion, status, annotations).
	after *corev1.Pod
	// deleted says the proxy was deleted for good (its finalizer removed, deleted at grace 0).
	deleted bool
}

// wrote records a status write made on base, and the API server's answer.
func (w *ownWrites) wrote(base, answer *corev1.Pod) {
	after := &corev1.Pod{}
	after.ResourceVersion = answer.ResourceVersion
	after.Annotations = answer.Annotations
	after.Status = answer.Status
	w.m.Store(types.NamespacedName{Namespace: base.Namespace, Name: base.Name}, ownWrite{uid: base.UID, before: base.ResourceVersion, after: after})
}

// deleted records that the proxy was let go: nothing is left to do for it, whatever the cache says.
func (w *ownWrites) deleted(proxy *corev1.Pod) {
	w.m.Store(types.NamespacedName{Namespace: proxy.Namespace, Name: proxy.Name}, ownWrite{uid: proxy.UID, deleted: true})
}

// echo says whether a proxy the cache now shows is exactly the answer to this reconciler's last
// status write (the watch event of the write itself): there is nothing new to decide on, and the
// record goes, as the cache has caught up.
func (w *ownWrites) echo(proxy metav1.Object) bool {
	key := types.NamespacedName{Namespace: proxy.GetNamespace(), Name: proxy.GetName()}
	v, ok := w.m.Load(key)
	if !ok {
		return false
	}
	own, _ := v.(ownWrite)
	if own.deleted || own.uid != proxy.GetUID() || own.after.ResourceVersion != proxy.GetResourceVersion() {
		return false
	}
	w.m.CompareAndDelete(key, v)
	return true
}

// letGo says whether this reconciler let this proxy go (removed its finalizer and deleted it):
// the watch events that follow (the finalizer's removal, the deletion) bring nothing to do.
func (w *ownWrites) letGo(proxy metav1.Object) bool {
	v, ok := w.m.Load(types.NamespacedName{Namespace: proxy.GetNamespace(), Name: proxy.GetName()})
	if !ok {
		return false
	}
	own, _ := v.(ownWrite)
	return own.deleted && own.uid == proxy.GetUID()
}

// forget drops what is remembered of a proxy (gone from the cache).
func (w *ownWrites) forget(key types.NamespacedName) { w.m.Delete(key) }

// recall brings a proxy read from the cache up to this reconciler's own last write, when the
// cache has not seen it yet; done says the proxy was already let go. What the cache shows of
// another incarnation, or of anything after the write, wins and the record is dropped.
func (w *ownWrites) recall(proxy *corev1.Pod) (done bool) {
	key := types.NamespacedName{Namespace: proxy.Namespace, Name: proxy.Name}
	v, ok := w.m.Load(key)
	if !ok {
		return false
	}
	own, _ := v.(ownWrite)
	switch {
	case own.uid != proxy.UID:
		w.m.Delete(key)
		return false
	case own.deleted:
		return true
	case proxy.ResourceVersion != own.before:
		w.m.Delete(key)
		return false
	}
	proxy.ResourceVersion = own.after.ResourceVersion
	proxy.Annotations = maps.Clone(own.after.Annotations)
	proxy.Status = *own.after.Status.DeepCopy()
	return false
}
