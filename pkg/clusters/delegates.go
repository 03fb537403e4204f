package clusters

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// DelegateHandler hears of every add, change and removal of a delegate in a secondary.
type DelegateHandler func(cluster string, delegate *corev1.Pod)

// delegateWatch is an informer on this primary's delegates in one secondary.
type delegateWatch struct {
	cancel   context.CancelFunc
	informer cache.SharedIndexInformer
}

func startDelegateWatch(ctx context.Context, cs kubernetes.Interface, primaryID, cluster string, handlers func() []DelegateHandler) *delegateWatch {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = flotillav1.LabelPrimary + "=" + primaryID }),
		informers.WithTransform(func(obj any) (any, error) {
			if p, ok := obj.(*corev1.Pod); ok {
				p.ManagedFields = nil
			}
			return obj, nil
		}))
	w := &delegateWatch{cancel: cancel, informer: factory.Core().V1().Pods().Informer()}
	notify := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			for _, h := range handlers() {
				h(cluster, p)
			}
		}
	}
	_, _ = w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: notify, UpdateFunc: func(_, o any) { notify(o) }, DeleteFunc: notify,
	})
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	return w
}

// AddDelegateHandler registers a handler for delegate events of every secondary.
func (r *Registry) AddDelegateHandler(h DelegateHandler) {
	r.mu.Lock()
	r.delegateHandlers = append(r.delegateHandlers, h)
	r.mu.Unlock()
}

func (r *Registry) handlers() []DelegateHandler {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]DelegateHandler(nil), r.delegateHandlers...)
}

// Secondary is what other components may use of one secondary: its clients and its delegates cache.
type Secondary struct {
	Name      string
	Client    client.Client
	Clientset kubernetes.Interface
	// Config reaches the secondary (for streams: exec, attach).
	Config *rest.Config
	// OwnerUID is the UID of this primary's FlotillaPrimary there ("" until it is known).
	OwnerUID  string
	delegates *delegateWatch
}

// Delegate reads a delegate from the cache. synced is false while the cache is not complete, so a
// missing delegate proves nothing yet.
func (s Secondary) Delegate(namespace, name string) (pod *corev1.Pod, synced bool, err error) {
	if s.delegates == nil || !s.delegates.informer.HasSynced() {
		return nil, false, nil
	}
	obj, exists, err := s.delegates.informer.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil, true, err
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, true, fmt.Errorf("unexpected %T in the delegate cache", obj)
	}
	return p, true, nil
}

// Secondary returns the usable secondary of that name.
func (r *Registry) Secondary(name string) (Secondary, bool) {
	r.mu.Lock()
	c, ok := r.clusters[name]
	r.mu.Unlock()
	if !ok || c.client == nil || !c.snapshot().UsableSecondary() {
		return Secondary{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return Secondary{Name: name, Client: c.ctrl, Clientset: c.client, Config: c.config, OwnerUID: c.ownerUID, delegates: c.delegates}, true
}

// Delegates lists this primary's delegates in the secondary from the cache; synced is false while
// the cache is not complete (then nothing may be concluded from what is missing).
func (s Secondary) Delegates() (pods []*corev1.Pod, synced bool) {
	if s.delegates == nil || !s.delegates.informer.HasSynced() {
		return nil, false
	}
	for _, o := range s.delegates.informer.GetStore().List() {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods, true
}
