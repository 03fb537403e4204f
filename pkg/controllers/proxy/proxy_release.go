package proxy

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// releaseReason says why a terminating proxy may go without proof that its delegate is gone:
// its virtual node is gone (the secondary was removed) or fenced out-of-service (an admin declared
// it dead), or, for an at-least-once pod, its secondary is unreachable past the failover taint
// and the proxy's grace period is over (its controller already runs a replacement; the sweep
// deletes the stale delegate when the secondary returns). At-most-once pods (StatefulSet's, with
// claims, or annotated flotilla.dev/at-most-once) wait for the proof or the fence, unless they
// chose to start afresh elsewhere (flotilla.dev/on-volume-cluster-loss: recreate): their
// replacement runs on new claims, so the old one, if it still runs, writes only to its own. node
// is nil when gone.
func releaseReason(proxy *corev1.Pod, node *corev1.Node, now time.Time) string {
	if node == nil {
		return flotillav1.ReasonClusterRemoved
	}
	unreachable := false
	for _, t := range node.Spec.Taints {
		switch t.Key {
		case corev1.TaintNodeOutOfService:
			return flotillav1.ReasonClusterFenced
		case flotillav1.TaintUnreachable:
			unreachable = true
		}
	}
	if unreachable && (!translate.AtMostOnce(proxy) || translate.RecreatesOnVolumeClusterLoss(proxy)) && remainingGrace(proxy, now) == 0 {
		return flotillav1.ReasonClusterUnreachable
	}
	return ""
}

// releaseWithoutDelegate lets a terminating proxy go when releaseReason allows it.
func (r *Reconciler) releaseWithoutDelegate(ctx context.Context, proxy *corev1.Pod) (bool, error) {
	var node corev1.Node
	found := &node
	if err := r.Client.Get(ctx, client.ObjectKey{Name: proxy.Spec.NodeName}, &node); apierrors.IsNotFound(err) {
		found = nil
	} else if err != nil {
		return false, fmt.Errorf("reading virtual node %s: %w", proxy.Spec.NodeName, err)
	}
	reason := releaseReason(proxy, found, r.now())
	if reason == "" {
		return false, nil
	}
	cluster, _ := flotillav1.ClusterOfNode(proxy.Spec.NodeName)
	r.event(proxy, corev1.EventTypeWarning, reason, "Release",
		"Released without deleting its delegate in %s (%s); the sweep removes a delegate left there if the cluster returns",
		cluster, reason)
	return true, r.letGo(ctx, proxy)
}

// delegateGrace is the grace period a terminating proxy's delegate is deleted with: what is left
// of the proxy's own. An at-most-once delegate is never deleted with 0 (a forced deletion removes
// the object while its containers may still run, and its replacement could start beside them):
// at least 1 s, so the secondary's kubelet confirms the end.
func delegateGrace(proxy *corev1.Pod, now time.Time) int64 {
	g := remainingGrace(proxy, now)
	if g == 0 && translate.AtMostOnce(proxy) {
		return 1
	}
	return g
}

// forceAgain says whether a delegate already terminating is deleted again to shorten its grace:
// only for at-least-once pods whose proxy's grace period is over.
func forceAgain(proxy *corev1.Pod, now time.Time) bool {
	return remainingGrace(proxy, now) == 0 && !translate.AtMostOnce(proxy)
}
