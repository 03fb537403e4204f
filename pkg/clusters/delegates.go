package clusters

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// Secondary is what other components may use of one secondary: its clients and its delegates cache.
type Secondary struct {
	Name      string
	Client    client.Client
	Clientset kubernetes.Interface
	// Config reaches the secondary (for streams: exec, attach).
	Config *rest.Config
	// OwnerUID is the UID of this primary's FlotillaPrimary there ("" until it is known).
	OwnerUID string
	// Running says the secondary answers its probes: a secondary that does not gets no calls but
	// bounded ones (its Client's calls time out, CallTimeout).
	Running   bool
	delegates cache.SharedIndexInformer
	deleted   *deletedDelegates
}

// DelegateDeleted says whether the secondary's watch said the delegate of this proxy (namespace,
// name, UID) was deleted: a proof it is gone, as a live read would be. It is used up once said.
func (s Secondary) DelegateDeleted(namespace, name string, proxyUID types.UID) bool {
	return s.deleted.seen(namespace, name, proxyUID)
}

// Delegate reads a delegate from the cache. synced is false while the cache is not complete, so a
// missing delegate proves nothing yet.
func (s Secondary) Delegate(namespace, name string) (pod *corev1.Pod, synced bool, err error) {
	if s.delegates == nil || !s.delegates.HasSynced() {
		return nil, false, nil
	}
	obj, exists, err := s.delegates.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil, true, err
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, true, fmt.Errorf("unexpected %T in the delegate cache", obj)
	}
	return p, true, nil
}

// Delegates lists this primary's delegates in the secondary from the cache; synced is false while
// the cache is not complete (then nothing may be concluded from what is missing).
func (s Secondary) Delegates() (pods []*corev1.Pod, synced bool) {
	if s.delegates == nil || !s.delegates.HasSynced() {
		return nil, false
	}
	for _, o := range s.delegates.GetStore().List() {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods, true
}

// Secondary returns the usable secondary of that name.
func (r *Registry) Secondary(name string) (Secondary, bool) {
	r.mu.Lock()
	c, ok := r.clusters[name]
	r.mu.Unlock()
	if !ok || c.client == nil {
		return Secondary{}, false
	}
	// A secondary whose identity changed keeps its virtual node, but its clients reach another
	// cluster than the one its delegates run in: nothing may use them until it is joined again.
	if snap := c.snapshot(); !snap.UsableSecondary() || snap.Reason == flotillav1.ReasonIdentityChanged {
		return Secondary{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	sec := Secondary{Name: name, Client: c.ctrl, Clientset: c.client, Config: c.config, OwnerUID: c.ownerUID,
		Running: c.state.Status == flotillav1.ClusterRunning}
	if c.remote != nil {
		sec.delegates, sec.deleted = c.remote.delegates, c.remote.deleted
	}
	return sec, true
}
