package proxy

import (
	"context"

	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/controllers/dependency"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// Reasons a proxy is Pending while its delegate cannot be created yet, and the reason of a proxy
// whose delegate vanished.
const (
	ReasonSecondaryUnavailable                                   = "SecondaryUnavailable"
	ReasonWaitingForDependencies                                 = "WaitingForDependencies"
	ReasonPreviousIncarnationTerminating                         = "PreviousIncarnationTerminating"
	ReasonNamespaceNotManaged                                    = "NamespaceNotManaged"
	ReasonDelegateRejected                                       = "DelegateRejected"
	ReasonDelegateCreated                                        = "DelegateCreated"
	ReasonDelegateLost                                           = "DelegateLost"
	transientRetry                                               = 2 * time.Second
	pendingRetry                                                 = 250 * time.Millisecond
	conditionDelegated                   corev1.PodConditionType = "flotilla.dev/Delegated"
)

// Secondaries is what the proxy reconciler needs of the cluster registry.
type Secondaries interface {
	Secondary(name string) (clusters.Secondary, bool)
	PrimaryID() string
	DelegateSource(h handler.EventHandler) source.Source
}

// ProxyReconciler makes each proxy pod bound to a virtual node have its delegate in that
// secondary, feeds the delegate's status back, and deletes the delegate before the proxy.
type ProxyReconciler struct {
	Client      client.Client
	Secondaries Secondaries
	Recorder    events.EventRecorder
	// Reflector copies the delegates' ConfigMaps, Secrets and ServiceAccounts to their secondary.
	Reflector *dependency.Reflector
	// FlatNetwork reports delegates' IPs in the proxies' status (--pod-network=flat).
	FlatNetwork bool

	// readyNamespaces remembers "cluster/namespace" pairs known to be managed and to have their
	// default ServiceAccount: checked once, not for every pod (forgotten when a create says the
	// namespace is gone).
	readyNamespaces sync.Map
}

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=get;update;patch

// Reconcile is one pass over one proxy.
func (r *ProxyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	proxy := &corev1.Pod{}
	if err := r.Client.Get(ctx, req.NamespacedName, proxy); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	cluster, ok := strings.CutPrefix(proxy.Spec.NodeName, flotillav1.VirtualNodePrefix)
	if !ok {
		return ctrl.Result{}, nil // not bound to a virtual node (yet)
	}
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", cluster)
	ctx = ctrl.LoggerInto(ctx, log)
	if !proxy.DeletionTimestamp.IsZero() {
		if released, err := r.releaseWithoutDelegate(ctx, proxy); released || err != nil {
			return ctrl.Result{}, err
		}
	}
	sec, ok := r.Secondaries.Secondary(cluster)
	if !ok {
		return r.pending(ctx, proxy, ReasonSecondaryUnavailable, fmt.Sprintf("Secondary cluster %s is not usable", cluster))
	}
	if !proxy.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, proxy, sec)
	}
	return r.reconcileNormal(ctx, proxy, sec)
}

func (r *ProxyReconciler) reconcileNormal(ctx context.Context, proxy *corev1.Pod, sec clusters.Secondary) (ctrl.Result, error) {
	if translate.Terminal(proxy) {
		return ctrl.Result{}, nil
	}
	delegate, synced, err := sec.Delegate(proxy.Namespace, proxy.Name)
	if err != nil || !synced {
		return ctrl.Result{RequeueAfter: transientRetry}, err
	}
	if delegate != nil && delegate.Annotations[flotillav1.AnnotationProxyUID] != string(proxy.UID) {
		// Same name, another incarnation (a StatefulSet pod recreated): the old delegate goes first.
		if delegate.DeletionTimestamp.IsZero() {
			if err := r.deleteDelegate(ctx, sec, delegate, nil); err != nil {
				return ctrl.Result{}, err
			}
		}
		return r.pending(ctx, proxy, ReasonPreviousIncarnationTerminating, "The delegate of the previous pod of this name is terminating")
	}
	if delegate == nil {
		if wasDelegated(proxy) {
			// Proven gone by a GET, not only by the cache (a relist could be behind).
			var live corev1.Pod
			err := sec.Client.Get(ctx, client.ObjectKey{Namespace: proxy.Namespace, Name: proxy.Name}, &live)
			if err == nil || !apierrors.IsNotFound(err) {
				return ctrl.Result{RequeueAfter: transientRetry}, client.IgnoreNotFound(err)
			}
			return r.delegateLost(ctx, proxy, sec.Name)
		}
		return r.createDelegate(ctx, proxy, sec)
	}
	return ctrl.Result{}, r.mirrorStatus(ctx, proxy, delegate)
}

// createDelegate creates the namespace (managed-by label) and the delegate; what fails for now
// leaves the proxy Pending with the reason and is retried.
func (r *ProxyReconciler) createDelegate(ctx context.Context, proxy *corev1.Pod, sec clusters.Secondary) (ctrl.Result, error) {
	primaryID := r.Secondaries.PrimaryID()
	if reason, msg, err := r.ensureNamespace(ctx, proxy.Namespace, sec); err != nil || reason != "" {
		if err != nil {
			return ctrl.Result{}, err
		}
		return r.pending(ctx, proxy, reason, msg)
	}
	if sec.OwnerUID == "" {
		return r.pending(ctx, proxy, ReasonWaitingForDependencies, fmt.Sprintf("Waiting for FlotillaPrimary %s in %s", primaryID, sec.Name))
	}
	ownerRef := translate.Owner(primaryID, sec.OwnerUID)
	if r.Reflector != nil {
		var missing *dependency.Missing
		if err := r.Reflector.Ensure(ctx, sec.Client, proxy, ownerRef); errors.As(err, &missing) {
			return r.pending(ctx, proxy, ReasonWaitingForDependencies, fmt.Sprintf("Waiting for %s in the primary", missing))
		} else if err != nil {
			return r.pending(ctx, proxy, ReasonWaitingForDependencies, fmt.Sprintf("Copying dependencies to %s: %v", sec.Name, err))
		}
	}
	delegate, err := translate.Delegate(proxy, primaryID, ownerRef)
	if err != nil {
		return r.fail(ctx, proxy, ReasonDelegateRejected, err.Error())
	}
	err = sec.Client.Create(ctx, delegate)
	switch {
	case err == nil:
		r.event(proxy, corev1.EventTypeNormal, ReasonDelegateCreated, "Create", "Delegate created in cluster %s", sec.Name)
		// No status write here: the first status mirrored from the delegate (its informer sees it
		// within milliseconds) carries the Delegated condition; one write per proxy saved. A
		// reconcile that runs before the cache shows the delegate gets AlreadyExists and waits.
		return ctrl.Result{}, nil
	case apierrors.IsAlreadyExists(err):
		return ctrl.Result{RequeueAfter: transientRetry}, nil // the cache will show it
	case permanent(err):
		return r.fail(ctx, proxy, ReasonDelegateRejected, fmt.Sprintf("Cluster %s refused the delegate: %v", sec.Name, err))
	default:
		if apierrors.IsNotFound(err) {
			r.readyNamespaces.Delete(sec.Name + "/" + proxy.Namespace) // deleted there meanwhile
		}
		// The namespace's default ServiceAccount not there yet, a quota, a webhook outage...
		return r.pending(ctx, proxy, ReasonWaitingForDependencies, fmt.Sprintf("Creating the delegate in %s: %v", sec.Name, err))
	}
}

// permanent says whether the secondary refused the delegate for good (invalid spec).
func permanent(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}

// ensureNamespace makes the delegate's namespace exist in the secondary with the managed-by label,
// and waits for its default ServiceAccount (a pod created before it is refused).
func (r *ProxyReconciler) ensureNamespace(ctx context.Context, name string, sec clusters.Secondary) (reason, message string, err error) {
	key := sec.Name + "/" + name
	if _, ok := r.readyNamespaces.Load(key); ok {
		return "", "", nil
	}
	primaryID := r.Secondaries.PrimaryID()
	var ns corev1.Namespace
	err = sec.Client.Get(ctx, client.ObjectKey{Name: name}, &ns)
	switch {
	case apierrors.IsNotFound(err):
		ns = corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			flotillav1.LabelManagedBy: primaryID, flotillav1.LabelPrimary: primaryID}}}
		if err := sec.Client.Create(ctx, &ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return ReasonWaitingForDependencies, fmt.Sprintf("Creating namespace %s in %s: %v", name, sec.Name, err), nil
		}
	case err != nil:
		return ReasonWaitingForDependencies, fmt.Sprintf("Reading namespace %s in %s: %v", name, sec.Name, err), nil
	case ns.Labels[flotillav1.LabelManagedBy] != primaryID:
		return ReasonNamespaceNotManaged, fmt.Sprintf("Namespace %s exists in %s without label %s=%s; an admin of %s may add it",
			name, sec.Name, flotillav1.LabelManagedBy, primaryID, sec.Name), nil
	}
	var sa corev1.ServiceAccount
	if err := sec.Client.Get(ctx, client.ObjectKey{Namespace: name, Name: "default"}, &sa); err != nil {
		msg := fmt.Sprintf("Waiting for the default ServiceAccount of namespace %s in %s", name, sec.Name)
		if !apierrors.IsNotFound(err) {
			msg += ": " + err.Error()
		}
		return ReasonWaitingForDependencies, msg, nil
	}
	r.readyNamespaces.Store(key, true)
	return "", "", nil
}

// reconcileDelete deletes the delegate, then lets the proxy go: the finalizer is removed once no
// delegate of this proxy exists, and the proxy is deleted at once, as a kubelet does.
func (r *ProxyReconciler) reconcileDelete(ctx context.Context, proxy *corev1.Pod, sec clusters.Secondary) (ctrl.Result, error) {
	delegate, synced, err := sec.Delegate(proxy.Namespace, proxy.Name)
	if err != nil || !synced {
		return ctrl.Result{RequeueAfter: transientRetry}, err
	}
	if delegate != nil && delegate.Annotations[flotillav1.AnnotationProxyUID] == string(proxy.UID) {
		if delegate.DeletionTimestamp.IsZero() || remainingGrace(proxy, time.Now()) == 0 {
			grace := remainingGrace(proxy, time.Now())
			if err := r.deleteDelegate(ctx, sec, delegate, &grace); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{RequeueAfter: transientRetry}, nil // the delegate watch brings us back sooner
	}
	return ctrl.Result{}, r.letGo(ctx, proxy)
}

// Reasons a terminating proxy is let go while its delegate may still exist.
const (
	ReasonClusterRemoved     = "ClusterRemoved"
	ReasonClusterFenced      = "ClusterFenced"
	ReasonClusterUnreachable = "ClusterUnreachable"
)

// releaseReason says why a terminating proxy may go without proof that its delegate is gone:
// its virtual node is gone (the secondary was removed) or fenced out-of-service (an admin declared
// it dead), or, for an at-least-once pod, its secondary is unreachable past the failover taint
// and the proxy's grace period is over (its controller already runs a replacement; the sweep
// deletes the stale delegate when the secondary returns). At-most-once pods (StatefulSet's, or
// annotated flotilla.dev/at-most-once) wait for the proof or the fence. node is nil when gone.
func releaseReason(proxy *corev1.Pod, node *corev1.Node, now time.Time) string {
	if node == nil {
		return ReasonClusterRemoved
	}
	unreachable := false
	for _, t := range node.Spec.Taints {
		switch t.Key {
		case corev1.TaintNodeOutOfService:
			return ReasonClusterFenced
		case flotillav1.TaintUnreachable:
			unreachable = true
		}
	}
	if unreachable && !atMostOnce(proxy) && remainingGrace(proxy, now) == 0 {
		return ReasonClusterUnreachable
	}
	return ""
}

func atMostOnce(proxy *corev1.Pod) bool {
	if _, ok := proxy.Annotations[flotillav1.AnnotationAtMostOnce]; ok {
		return true
	}
	ref := metav1.GetControllerOf(proxy)
	return ref != nil && ref.Kind == "StatefulSet"
}

// releaseWithoutDelegate lets a terminating proxy go when releaseReason allows it.
func (r *ProxyReconciler) releaseWithoutDelegate(ctx context.Context, proxy *corev1.Pod) (bool, error) {
	var node corev1.Node
	found := &node
	if err := r.Client.Get(ctx, client.ObjectKey{Name: proxy.Spec.NodeName}, &node); apierrors.IsNotFound(err) {
		found = nil
	} else if err != nil {
		return false, fmt.Errorf("reading virtual node %s: %w", proxy.Spec.NodeName, err)
	}
	reason := releaseReason(proxy, found, time.Now())
	if reason == "" {
		return false, nil
	}
	r.event(proxy, corev1.EventTypeWarning, reason, "Release",
		"Released without deleting its delegate in %s (%s); the sweep removes a delegate left there if the cluster returns",
		strings.TrimPrefix(proxy.Spec.NodeName, flotillav1.VirtualNodePrefix), reason)
	return true, r.letGo(ctx, proxy)
}

// letGo removes the finalizer and deletes the proxy at once, as a kubelet does.
func (r *ProxyReconciler) letGo(ctx context.Context, proxy *corev1.Pod) error {
	if controllerutil.ContainsFinalizer(proxy, flotillav1.FinalizerDelegate) {
		base := proxy.DeepCopy()
		controllerutil.RemoveFinalizer(proxy, flotillav1.FinalizerDelegate)
		if err := r.Client.Patch(ctx, proxy, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	zero := int64(0)
	err := r.Client.Delete(ctx, proxy, &client.DeleteOptions{GracePeriodSeconds: &zero,
		Preconditions: &metav1.Preconditions{UID: &proxy.UID}})
	return client.IgnoreNotFound(err)
}

// remainingGrace is what is left of the proxy's own grace period: a proxy evicted while its
// secondary was unreachable has none left, so its stale delegate goes at once when it returns.
func remainingGrace(proxy *corev1.Pod, now time.Time) int64 {
	if proxy.DeletionTimestamp == nil {
		if proxy.DeletionGracePeriodSeconds != nil {
			return *proxy.DeletionGracePeriodSeconds
		}
		return corev1.DefaultTerminationGracePeriodSeconds
	}
	left := int64(proxy.DeletionTimestamp.Sub(now).Seconds())
	if left < 0 {
		return 0
	}
	return left
}

func (r *ProxyReconciler) deleteDelegate(ctx context.Context, sec clusters.Secondary, delegate *corev1.Pod, grace *int64) error {
	opts := &client.DeleteOptions{GracePeriodSeconds: grace, Preconditions: &metav1.Preconditions{UID: &delegate.UID}}
	if err := sec.Client.Delete(ctx, delegate, opts); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting delegate %s/%s in %s: %w", delegate.Namespace, delegate.Name, sec.Name, err)
	}
	return nil
}

// mirrorStatus patches the proxy's status and its delegate-ip annotation in one write to the status
// subresource (which, for pods, takes labels and annotations too; never the spec).
func (r *ProxyReconciler) mirrorStatus(ctx context.Context, proxy, delegate *corev1.Pod) error {
	want := translate.ProxyStatus(proxy, delegate, r.FlatNetwork)
	want.Conditions = withCondition(want.Conditions, delegatedCondition(proxy))
	ip := delegate.Status.PodIP
	newIP := ip != "" && proxy.Annotations[flotillav1.AnnotationDelegateIP] != ip
	if !newIP && (translate.StatusEqual(proxy.Status, want) || stillPending(proxy.Status, want)) {
		return nil
	}
	base := proxy.DeepCopy()
	proxy.Status = want
	if newIP {
		if proxy.Annotations == nil {
			proxy.Annotations = map[string]string{}
		}
		proxy.Annotations[flotillav1.AnnotationDelegateIP] = ip
	}
	return client.IgnoreNotFound(r.Client.Status().Patch(ctx, proxy, client.MergeFrom(base)))
}

// stillPending says whether a new status of a pending delegate is not worth a write: the proxy
// already says Pending and Delegated, and no condition turned False with a new reason (such as
// the secondary's Unschedulable). Progress inside Pending (PodScheduled) shows with the next phase.
func stillPending(current, want corev1.PodStatus) bool {
	if current.Phase != corev1.PodPending || want.Phase != corev1.PodPending || !hasCondition(current.Conditions, conditionDelegated) {
		return false
	}
	for _, c := range want.Conditions {
		if c.Status != corev1.ConditionFalse {
			continue
		}
		if prev, ok := conditionOf(current.Conditions, c.Type); !ok || prev.Status != c.Status || prev.Reason != c.Reason || prev.Message != c.Message {
			return false
		}
	}
	return true
}

func hasCondition(list []corev1.PodCondition, t corev1.PodConditionType) bool {
	_, ok := conditionOf(list, t)
	return ok
}

func conditionOf(list []corev1.PodCondition, t corev1.PodConditionType) (corev1.PodCondition, bool) {
	for _, c := range list {
		if c.Type == t {
			return c, true
		}
	}
	return corev1.PodCondition{}, false
}

func wasDelegated(proxy *corev1.Pod) bool {
	for _, c := range proxy.Status.Conditions {
		if c.Type == conditionDelegated && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func delegatedCondition(proxy *corev1.Pod) corev1.PodCondition {
	for _, c := range proxy.Status.Conditions {
		if c.Type == conditionDelegated {
			return c
		}
	}
	return corev1.PodCondition{Type: conditionDelegated, Status: corev1.ConditionTrue, Reason: ReasonDelegateCreated, LastTransitionTime: metav1.Now()}
}

func withCondition(list []corev1.PodCondition, c corev1.PodCondition) []corev1.PodCondition {
	for i := range list {
		if list[i].Type == c.Type {
			list[i] = c
			return list
		}
	}
	return append(list, c)
}

// delegateLost handles a delegate that existed and is gone while its proxy lives: a proxy with a
// controller that re-creates pods (ReplicaSet, StatefulSet) is deleted so it is re-elected; a bare
// or Job pod is set Failed with reason DelegateLost.
func (r *ProxyReconciler) delegateLost(ctx context.Context, proxy *corev1.Pod, cluster string) (ctrl.Result, error) {
	if ref := metav1.GetControllerOf(proxy); ref != nil && (ref.Kind == "ReplicaSet" || ref.Kind == "StatefulSet") {
		r.event(proxy, corev1.EventTypeWarning, ReasonDelegateLost, "Delete",
			"The delegate in cluster %s is gone; the proxy is deleted so that its %s re-creates it", cluster, ref.Kind)
		err := r.Client.Delete(ctx, proxy, &client.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &proxy.UID}})
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.event(proxy, corev1.EventTypeWarning, ReasonDelegateLost, "Fail", "The delegate in cluster %s is gone; the pod has failed", cluster)
	return r.fail(ctx, proxy, ReasonDelegateLost, fmt.Sprintf("The delegate in cluster %s is gone", cluster))
}

// pending keeps a proxy Pending with a reason, and retries soon: the reasons are transient.
func (r *ProxyReconciler) pending(ctx context.Context, proxy *corev1.Pod, reason, message string) (ctrl.Result, error) {
	if translate.Terminal(proxy) || proxy.Status.Phase == corev1.PodRunning ||
		(proxy.Status.Reason == reason && proxy.Status.Message == message) {
		return ctrl.Result{RequeueAfter: pendingRetry}, nil
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Proxy pending", "reason", reason, "message", message)
	base := proxy.DeepCopy()
	proxy.Status.Phase, proxy.Status.Reason, proxy.Status.Message = corev1.PodPending, reason, message
	if err := r.Client.Status().Patch(ctx, proxy, client.MergeFrom(base)); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{RequeueAfter: pendingRetry}, nil
}

// fail sets a proxy Failed for good.
func (r *ProxyReconciler) fail(ctx context.Context, proxy *corev1.Pod, reason, message string) (ctrl.Result, error) {
	base := proxy.DeepCopy()
	proxy.Status.Phase, proxy.Status.Reason, proxy.Status.Message = corev1.PodFailed, reason, message
	for i := range proxy.Status.Conditions {
		if proxy.Status.Conditions[i].Type == corev1.PodReady || proxy.Status.Conditions[i].Type == corev1.ContainersReady {
			proxy.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	if err := r.Client.Status().Patch(ctx, proxy, client.MergeFrom(base)); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, nil
}

func (r *ProxyReconciler) event(proxy *corev1.Pod, kind, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(proxy, nil, kind, reason, action, format, args...)
	}
}

// SetupWithManager watches proxies in the primary and delegates in every secondary.
func (r *ProxyReconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	isProxy := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[flotillav1.LabelProxy] == "true" })
	if workers <= 0 {
		workers = 1
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("proxy").
		For(&corev1.Pod{}, builder.WithPredicates(isProxy)).
		// A delegate has its proxy's namespace and name.
		WatchesRawSource(r.Secondaries.DelegateSource(&handler.EnqueueRequestForObject{})).
		// Per-item backoff only: client-go's default also caps all items at 10/s, which would
		// throttle a burst of elected pods behind the first failures.
		WithOptions(controller.Options{MaxConcurrentReconciles: workers,
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](20*time.Millisecond, 10*time.Second)}).
		Complete(r)
}
