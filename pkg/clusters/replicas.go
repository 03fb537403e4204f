package clusters

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// ReplicaHandler hears that an object a Replicator applied in a secondary was added, changed or
// deleted (someone's edit to revert, a deletion to repair).
type ReplicaHandler func(cluster, replicator string)

// startReplicaWatch watches, in one secondary, the ConfigMaps, Services, Deployments and Ingresses
// this primary's Replicators applied (label flotilla.dev/replicator). Secrets are not watched:
// Flotilla never reads Secrets in a secondary; the Replicator's periodic resync repairs them.
func startReplicaWatch(ctx context.Context, cs kubernetes.Interface, primaryID, cluster string, handlers func() []ReplicaHandler) context.CancelFunc {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = flotillav1.LabelPrimary + "=" + primaryID + "," + flotillav1.LabelReplicator
		}),
		informers.WithTransform(func(obj any) (any, error) {
			if m, ok := obj.(metav1.Object); ok {
				m.SetManagedFields(nil)
			}
			return obj, nil
		}))
	notify := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		m, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		name := m.GetLabels()[flotillav1.LabelReplicator]
		for _, h := range handlers() {
			h(cluster, name)
		}
	}
	funcs := cache.ResourceEventHandlerFuncs{AddFunc: notify, UpdateFunc: func(_, o any) { notify(o) }, DeleteFunc: notify}
	for _, inf := range []cache.SharedIndexInformer{
		factory.Core().V1().ConfigMaps().Informer(),
		factory.Core().V1().Services().Informer(),
		factory.Apps().V1().Deployments().Informer(),
		factory.Networking().V1().Ingresses().Informer(),
	} {
		_, _ = inf.AddEventHandler(funcs)
	}
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	return cancel
}

// AddReplicaHandler registers a handler for replicated-object events of every secondary.
func (r *Registry) AddReplicaHandler(h ReplicaHandler) {
	r.mu.Lock()
	r.replicaHandlers = append(r.replicaHandlers, h)
	r.mu.Unlock()
}

func (r *Registry) replicaHandlersCopy() []ReplicaHandler {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ReplicaHandler(nil), r.replicaHandlers...)
}
