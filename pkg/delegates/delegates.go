package delegates

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// Watch is this primary's delegates in every usable secondary: a delegate has the namespace and
// name of its proxy. Its cache keeps only what Flotilla reads back (slim), and beside it the
// deletions its watch saw (Deleted).
var Watch = clusters.Watch{
	Name:      "delegates",
	Object:    &corev1.Pod{},
	Selector:  func(primaryID string) string { return flotillav1.LabelPrimary + "=" + primaryID },
	Transform: slim,
	Track:     func(cache.SharedIndexInformer) any { return &deletedDelegates{} },
	// Recorded as the proxy controller's source gets the deletion, not by a handler of its own
	// that could run after the controller looked.
	OnDelete: func(tracked, obj any) {
		if d, ok := tracked.(*deletedDelegates); ok {
			d.onDelete(obj)
		}
	},
}

// Get reads a delegate from the secondary's cache. synced is false while the cache is not
// complete, so a missing delegate proves nothing yet.
func Get(sec clusters.Secondary, namespace, name string) (pod *corev1.Pod, synced bool, err error) {
	store, _, synced := sec.Cached(Watch)
	if !synced {
		return nil, false, nil
	}
	obj, exists, err := store.GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil, true, err
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, true, fmt.Errorf("unexpected %T in the delegate cache", obj)
	}
	return p, true, nil
}

// List lists this primary's delegates in the secondary from the cache; synced is false while
// the cache is not complete (then nothing may be concluded from what is missing).
func List(sec clusters.Secondary) (pods []*corev1.Pod, synced bool) {
	store, _, synced := sec.Cached(Watch)
	if !synced {
		return nil, false
	}
	for _, o := range store.List() {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods, true
}

// Deleted says whether the secondary's watch said the delegate of this proxy (namespace, name,
// UID) was deleted: a proof it is gone, as a live read would be. It is used up once said.
func Deleted(sec clusters.Secondary, namespace, name string, proxyUID types.UID) bool {
	_, tracked, synced := sec.Cached(Watch)
	d, ok := tracked.(*deletedDelegates)
	return synced && ok && d.seen(namespace, name, proxyUID)
}
