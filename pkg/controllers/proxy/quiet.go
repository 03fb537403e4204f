package proxy

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// DefaultQuietStart is the manager's quiet start (--quiet-start): how long a delegate this
// process created may simply start before its proxy is written. A delegate Running within it
// costs its proxy one status write (Delegated and Running together) and no read of its Events.
// One still Pending then gets the Delegated condition written, and its Events looked at (a slow
// image pull, a volume that does not mount). 15 s covers a start from a cached image with room.
const DefaultQuietStart = 15 * time.Second

// delegateNews says whether a delegate's addition (old nil) or change may change what its proxy
// shows or what is done for it, so that it is worth a reconcile. Not worth one: the addition of a
// delegate this process has just created, simply starting, during a quiet start (its creation
// already decided all there is; afterQuietStart looks again if it does not run; without a quiet
// start that addition is what writes the proxy's Pending and Delegated), a change within Pending
// that shows no new trouble (quietChange), its termination's start when its proxy is terminating
// (the proxy's deletion made it), a change within its termination (stillTerminating), and a
// change of nothing it reads (nothingRead).
// Deletions are always delivered.
func (r *Reconciler) delegateNews(old, obj client.Object) bool {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return true
	}
	if old == nil {
		key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
		proxyUID := types.UID(pod.Annotations[flotillav1.AnnotationProxyUID])
		return r.QuietStart <= 0 || !r.starts.starting(key, proxyUID) || !simplyStarting(pod)
	}
	before, ok := old.(*corev1.Pod)
	if !ok {
		return true
	}
	if before.DeletionTimestamp.IsZero() && !pod.DeletionTimestamp.IsZero() && r.proxyTerminating(pod) {
		return false // the proxy's deletion deleted it: its deletion is what comes next
	}
	return !quietChange(before, pod) && !stillTerminating(before, pod) && !nothingRead(before, pod)
}

// nothingRead says whether a change of a delegate leaves everything the proxy reconciler reads
// of it as it was: its status, whether it terminates, its proxy, its containers' images and
// resources, its ephemeral containers (a change of labels, or of what its cache drops).
func nothingRead(old, obj *corev1.Pod) bool {
	return old.UID == obj.UID && old.DeletionTimestamp.IsZero() == obj.DeletionTimestamp.IsZero() &&
		old.Annotations[flotillav1.AnnotationProxyUID] == obj.Annotations[flotillav1.AnnotationProxyUID] &&
		sameContainers(old.Spec.InitContainers, obj.Spec.InitContainers) && sameContainers(old.Spec.Containers, obj.Spec.Containers) &&
		len(old.Spec.EphemeralContainers) == len(obj.Spec.EphemeralContainers) && equality.Semantic.DeepEqual(old.Status, obj.Status)
}

// proxyTerminating says whether the cache shows the delegate's proxy terminating.
func (r *Reconciler) proxyTerminating(delegate *corev1.Pod) bool {
	run := r.running.Load()
	if r.cache == nil || run == nil {
		return false
	}
	var proxy corev1.Pod
	err := r.cache.Get(run.ctx, client.ObjectKeyFromObject(delegate), &proxy)
	return err == nil && string(proxy.UID) == delegate.Annotations[flotillav1.AnnotationProxyUID] && !proxy.DeletionTimestamp.IsZero()
}

// stillTerminating says whether a change of a delegate is one within its termination (its
// containers stopping): what follows for its proxy comes with its deletion, or with the end of
// the proxy's grace period (deleteRecheck), not with these.
func stillTerminating(old, obj *corev1.Pod) bool {
	return old.UID == obj.UID && !old.DeletionTimestamp.IsZero() && !obj.DeletionTimestamp.IsZero()
}

// inQuietStart says whether a proxy's delegate, created by this process less than QuietStart
// ago, simply starts.
func (r *Reconciler) inQuietStart(proxy, delegate *corev1.Pod) bool {
	created := r.starts.createdAt(proxy)
	return !created.IsZero() && r.now().Sub(created) < r.QuietStart && simplyStarting(delegate)
}

// simplyStarting says whether a delegate is Pending, not terminating, and shows no trouble.
func simplyStarting(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp.IsZero() && phaseOf(pod) == corev1.PodPending && len(troubles(pod.Status)) == 0
}

// quietChange says whether a change of a delegate leaves nothing for its proxy to show or do: it
// stays Pending (before and after), is not terminating, belongs to the same proxy, keeps its
// containers' images and resources (what the reconciler carries from the proxy), no container
// restarted, and its troubles are the same. Progress within Pending (bound to a node, an IP,
// ContainerCreating) shows with the next phase anyway (stillPending).
func quietChange(old, obj *corev1.Pod) bool {
	return old.UID == obj.UID && obj.DeletionTimestamp.IsZero() &&
		phaseOf(old) == corev1.PodPending && phaseOf(obj) == corev1.PodPending &&
		slices.Equal(troubles(old.Status), troubles(obj.Status)) && restarts(old) == restarts(obj) &&
		old.Annotations[flotillav1.AnnotationProxyUID] == obj.Annotations[flotillav1.AnnotationProxyUID] &&
		sameContainers(old.Spec.InitContainers, obj.Spec.InitContainers) && sameContainers(old.Spec.Containers, obj.Spec.Containers) &&
		len(old.Spec.EphemeralContainers) == len(obj.Spec.EphemeralContainers)
}

// sameContainers says whether two lists of containers have the same names, images and resources.
func sameContainers(a, b []corev1.Container) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.Container) bool {
		return x.Name == y.Name && x.Image == y.Image && equality.Semantic.DeepEqual(x.Resources, y.Resources)
	})
}

// restarts is the sum of a pod's containers' restart counts.
func restarts(pod *corev1.Pod) int32 {
	var n int32
	for _, st := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		n += st.RestartCount
	}
	return n
}

// phaseOf is a pod's phase, Pending when it has none yet.
func phaseOf(pod *corev1.Pod) corev1.PodPhase {
	if pod.Status.Phase == "" {
		return corev1.PodPending
	}
	return pod.Status.Phase
}

// afterQuietStart brings a proxy back when its quiet start ends, if this process has not seen
// its delegate Running by then: its Pending status is written with the Delegated condition, and
// its delegate's Events are looked at. The delegate's quiet changes bring no reconcile
// (delegateNews), so without this a delegate that never leaves Pending would show nothing.
// Without a quiet start the delegate's addition brings the proxy back (delegateNews).
func (r *Reconciler) afterQuietStart(proxy *corev1.Pod) {
	if r.QuietStart <= 0 {
		return
	}
	key, uid := client.ObjectKeyFromObject(proxy), proxy.UID
	time.AfterFunc(r.QuietStart, func() {
		if run := r.running.Load(); run != nil && r.starts.starting(key, uid) {
			run.queue.Add(reconcile.Request{NamespacedName: key})
		}
	})
}

// recheckAfter brings a terminating proxy back after d, unless the cache shows it gone by then or
// this reconciler let it go (a requeue of the controller's own would come anyway: a reconcile
// for nothing).
func (r *Reconciler) recheckAfter(proxy *corev1.Pod, d time.Duration) {
	key, uid := client.ObjectKeyFromObject(proxy), proxy.UID
	time.AfterFunc(d, func() {
		run := r.running.Load()
		if run == nil {
			return
		}
		if r.cache != nil {
			var now corev1.Pod
			if err := r.cache.Get(run.ctx, key, &now); apierrors.IsNotFound(err) || err == nil && (now.UID != uid || r.own.letGo(&now)) {
				return
			}
		}
		run.queue.Add(reconcile.Request{NamespacedName: key})
	})
}

// running is the controller while it runs: its context and work queue.
type running struct {
	ctx   context.Context
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
}

// keepRunning is a source that only keeps the running controller's context and work queue (for
// afterQuietStart and delegateNews); a controller started anew is kept anew.
func (r *Reconciler) keepRunning(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	r.running.Store(&running{ctx: ctx, queue: q})
	return nil
}
