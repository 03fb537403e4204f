package proxy

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/internal/clocks"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/tracing"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// mirrorStatus grafts the delegate's status onto the proxy, and its IP onto the delegate-ip
// annotation: the deferred patch writes both in one write to the status subresource (which, for
// pods, takes labels and annotations too; never the spec).
func (r *Reconciler) mirrorStatus(proxy, delegate *corev1.Pod) {
	if delegate.Status.Phase == corev1.PodRunning && proxy.Status.Phase != corev1.PodRunning {
		r.starts.delegateRunning(proxy, clusterOf(proxy), r.now())
	}
	want := translate.ProxyStatus(proxy, delegate, r.FlatNetwork)
	created := r.starts.createdAt(proxy)
	want.Conditions = withCondition(want.Conditions, r.delegatedCondition(proxy, created))
	ip := delegate.Status.PodIP
	// A delegate's IP known while it is still Pending waits for its next phase: one write, not
	// two (nothing answers at that IP before its containers run).
	pending := stillPending(proxy.Status, want) || quietStart(proxy.Status, want, created, r.now(), r.QuietStart)
	newIP := ip != "" && proxy.Annotations[flotillav1.AnnotationDelegateIP] != ip && !pending
	if !newIP && (translate.StatusEqual(proxy.Status, want) || pending) {
		return
	}
	proxy.Status = want
	if newIP {
		if proxy.Annotations == nil {
			proxy.Annotations = map[string]string{}
		}
		proxy.Annotations[flotillav1.AnnotationDelegateIP] = ip
	}
}

// patchStatus writes what the pass changed of the proxy's status and annotations, in one patch
// of the status subresource; nothing when nothing changed. A proxy gone meanwhile is not an error.
func (r *Reconciler) patchStatus(ctx context.Context, base, proxy *corev1.Pod) error {
	if equality.Semantic.DeepEqual(base.Status, proxy.Status) && equality.Semantic.DeepEqual(base.Annotations, proxy.Annotations) {
		return nil
	}
	changed := base.DeepCopy()
	changed.Status, changed.Annotations = proxy.Status, proxy.Annotations
	cluster, _ := flotillav1.ClusterOfNode(proxy.Spec.NodeName)
	ctx, span := r.trace(ctx, spanStatus, proxy, cluster)
	span.SetAttributes(tracing.KeyOutcome.String(string(proxy.Status.Phase)))
	err := r.Client.Status().Patch(ctx, changed, client.MergeFrom(base))
	tracing.End(span, err)
	if err != nil {
		return client.IgnoreNotFound(fmt.Errorf("patching the status of proxy %s/%s: %w", proxy.Namespace, proxy.Name, err))
	}
	r.own.wrote(base, changed)
	if base.Status.Phase != corev1.PodRunning && changed.Status.Phase == corev1.PodRunning {
		r.starts.proxyRunning(changed, clusterOf(changed), r.now())
	}
	return nil
}

// clusterOf is the cluster of the virtual node a proxy is bound to ("" for none).
func clusterOf(proxy *corev1.Pod) string {
	cluster, _ := flotillav1.ClusterOfNode(proxy.Spec.NodeName)
	return cluster
}

// stillPending says whether a new status of a pending delegate is not worth a write: the proxy
// already says Pending and Delegated and shows the same troubles (troubles) as the new status.
// Such progress inside Pending (PodScheduled, ContainerCreating) shows with the next phase.
func stillPending(current, want corev1.PodStatus) bool {
	return current.Phase == corev1.PodPending && want.Phase == corev1.PodPending &&
		hasCondition(current.Conditions, flotillav1.PodConditionDelegated) && slices.Equal(troubles(current), troubles(want))
}

// quietStart says whether the first status write of a proxy may wait for its delegate's next
// phase: this process created the delegate less than window ago (created), the proxy
// says nothing of its own yet (no reason: a Pending reason an earlier pass wrote must be
// cleared), and the delegate simply starts (no troubles). The Delegated condition and the
// delegate's IP then come with Running, in one write; a delegate still Pending when the window
// ends gets them then (afterQuietStart).
func quietStart(current, want corev1.PodStatus, created, now time.Time, window time.Duration) bool {
	return !created.IsZero() && now.Sub(created) < window &&
		current.Phase == corev1.PodPending && current.Reason == "" && current.Message == "" &&
		want.Phase == corev1.PodPending && len(troubles(want)) == 0
}

// troubles is what a status tells beyond what every pod says while it simply starts
// (startingReasons), in order: each condition False for another reason (the secondary's
// Unschedulable) with its message, and each container waiting for another reason (ErrImagePull,
// CrashLoopBackOff).
func troubles(status corev1.PodStatus) []string {
	var out []string
	for _, c := range status.Conditions {
		if c.Status == corev1.ConditionFalse && !startingReasons[c.Reason] {
			out = append(out, "condition "+string(c.Type)+" "+c.Reason+": "+c.Message)
		}
	}
	for _, st := range slices.Concat(status.InitContainerStatuses, status.ContainerStatuses) {
		if w := st.State.Waiting; w != nil && !startingReasons[w.Reason] {
			out = append(out, "container "+st.Name+" "+w.Reason)
		}
	}
	slices.Sort(out)
	return out
}

// startingReasons are what a pod's conditions and containers say while it simply starts.
var startingReasons = map[string]bool{
	"ContainersNotReady": true, "ContainersNotInitialized": true, "PodInitializing": true, "ContainerCreating": true,
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
		if c.Type == flotillav1.PodConditionDelegated && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// delegatedCondition is the proxy's Delegated condition: the one it has, else True since the
// delegate's creation by this process (created), or since now when another process created it.
func (r *Reconciler) delegatedCondition(proxy *corev1.Pod, created time.Time) corev1.PodCondition {
	for _, c := range proxy.Status.Conditions {
		if c.Type == flotillav1.PodConditionDelegated {
			return c
		}
	}
	if created.IsZero() {
		created = r.now()
	}
	return corev1.PodCondition{Type: flotillav1.PodConditionDelegated, Status: corev1.ConditionTrue, Reason: flotillav1.ReasonDelegateCreated, LastTransitionTime: metav1.NewTime(created)}
}

// withCondition sets a proxy's own condition in a list: in its place, or first when new, where
// translate.ProxyStatus keeps a proxy's own conditions (before the delegate's), so that the order
// written is the order computed again (a different order is a different status, and a write).
func withCondition(list []corev1.PodCondition, c corev1.PodCondition) []corev1.PodCondition {
	for i := range list {
		if list[i].Type == c.Type {
			list[i] = c
			return list
		}
	}
	return slices.Insert(list, 0, c)
}

// pending keeps a proxy Pending with a reason and tries again later: the reasons are transient,
// and the wait grows with the proxy's age (pendingBackoff). What it waits for in the primary (a
// ConfigMap or Secret) brings it back at once through the dependency watch.
func (r *Reconciler) pending(proxy *corev1.Pod, reason, message string) (ctrl.Result, error) {
	if !translate.Terminal(proxy) && proxy.Status.Phase != corev1.PodRunning {
		proxy.Status.Phase, proxy.Status.Reason, proxy.Status.Message = corev1.PodPending, reason, message
	}
	return ctrl.Result{RequeueAfter: pendingRetry(proxy, r.now())}, nil
}

// pendingRetry is pendingBackoff, except that a terminating proxy is looked at again when its
// grace period ends: a proxy of a secondary that is away is released then (releaseReason), not up
// to a backoff later.
func pendingRetry(proxy *corev1.Pod, now time.Time) time.Duration {
	d := pendingBackoff(now.Sub(proxy.CreationTimestamp.Time))
	if proxy.DeletionTimestamp != nil {
		if until := proxy.DeletionTimestamp.Sub(now); until < d {
			return max(until, pendingRetryFloor)
		}
	}
	return d
}

// pendingBackoff is the wait before a Pending proxy is tried again: a quarter of its age, from
// 250 ms to 30 s. A young proxy (a namespace's ServiceAccount a moment late) is retried fast; one
// waiting for minutes costs a few calls a minute, not four a second (each retry reads and
// re-applies its dependencies).
func pendingBackoff(age time.Duration) time.Duration {
	d := age / 4
	switch {
	case d < pendingRetryFloor:
		return pendingRetryFloor
	case d > pendingRetryCeiling:
		return pendingRetryCeiling
	}
	return d
}

// fail sets a proxy Failed for good.
func (r *Reconciler) fail(proxy *corev1.Pod, reason, message string) (ctrl.Result, error) {
	proxy.Status.Phase, proxy.Status.Reason, proxy.Status.Message = corev1.PodFailed, reason, message
	for i := range proxy.Status.Conditions {
		if proxy.Status.Conditions[i].Type == corev1.PodReady || proxy.Status.Conditions[i].Type == corev1.ContainersReady {
			proxy.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	return ctrl.Result{}, nil
}

// now is the reconciler's clock.
func (r *Reconciler) now() time.Time { return clocks.Now(r.Clock) }
