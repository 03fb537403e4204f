package proxy

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// Strays does, for a pod bound to a virtual node that is not a proxy, what a node's kubelet
// would: say why it does not run, and let it go when it is deleted. Such a pod tolerates every
// taint and names the virtual node (a Deployment with a hostname selector, a DaemonSet made
// before Flotilla); nothing runs it, so without this it stays Pending with no reason, and once
// deleted it stays Terminating for ever (no kubelet confirms that its containers stopped), and
// so does its namespace's deletion. It runs on the leader: a list per virtual node and interval,
// with a field selector the API server answers from its watch cache. The manager's cache holds
// proxies only, so strays are listed, not watched.
type Strays struct {
	// Reader lists pods in the primary (not the manager's cache, which holds proxies only).
	Reader client.Reader
	// Writer patches their status and deletes them.
	Writer   client.Client
	Registry interface{ Snapshots() []clusters.Snapshot }
	Recorder events.EventRecorder
	Interval time.Duration
	Log      logr.Logger
}

// NeedLeaderElection says yes: one replica acts.
func (s *Strays) NeedLeaderElection() bool { return true }

// Start looks every Interval until ctx ends.
func (s *Strays) Start(ctx context.Context) error {
	wait.UntilWithContext(ctx, s.look, s.Interval)
	return nil
}

// strayAction is what a stray needs.
type strayAction int

const (
	strayNothing strayAction = iota
	// strayMark: say on its status why it does not run (once).
	strayMark
	// strayRelease: it is being deleted and nothing runs it: delete it for good.
	strayRelease
)

// strayDecision decides for a pod bound to a virtual node.
func strayDecision(pod *corev1.Pod) strayAction {
	switch {
	case pod.Labels[flotillav1.LabelProxy] == "true":
		return strayNothing // the proxy reconciler's
	case pod.DeletionTimestamp != nil:
		return strayRelease
	case pod.Status.Phase == corev1.PodPending && pod.Status.Reason != flotillav1.ReasonNotElected:
		return strayMark
	}
	return strayNothing
}

// notProxy selects pods without flotilla.dev/proxy=true (the webhook sets it on every proxy when
// it is created, and refuses its removal).
var notProxy = func() labels.Selector {
	r, err := labels.NewRequirement(flotillav1.LabelProxy, selection.NotEquals, []string{"true"})
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*r)
}()

func (s *Strays) look(ctx context.Context) {
	for _, snap := range s.Registry.Snapshots() {
		node := flotillav1.VirtualNodeName(snap.Name)
		var pods corev1.PodList
		// ResourceVersion 0: from the API server's watch cache, where spec.nodeName is indexed.
		if err := s.Reader.List(ctx, &pods, &client.ListOptions{LabelSelector: notProxy,
			FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node), Raw: &metav1.ListOptions{ResourceVersion: "0"}}); err != nil {
			s.Log.Error(err, "Listing pods bound to a virtual node failed", "node", node)
			continue
		}
		for i := range pods.Items {
			if err := s.handle(ctx, &pods.Items[i], node); err != nil {
				s.Log.Error(err, "Handling a pod bound to a virtual node failed", "node", node, "pod", client.ObjectKeyFromObject(&pods.Items[i]))
			}
		}
	}
}

func (s *Strays) handle(ctx context.Context, pod *corev1.Pod, node string) error {
	switch strayDecision(pod) {
	case strayRelease:
		// Nothing was ever started for it: Flotilla makes delegates for proxies only.
		uid := pod.UID
		err := s.Writer.Delete(ctx, pod, &client.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting pod %s: %w", pod.Name, err)
		}
		s.Log.Info("Deleted pod bound to a virtual node without being elected", "node", node, "pod", client.ObjectKeyFromObject(pod))
	case strayMark:
		msg := fmt.Sprintf("Pod is bound to virtual node %s, where only pods elected by Flotilla (annotation %s, in a namespace labelled %s=true) run; it never starts there. Delete it, or elect it.",
			node, flotillav1.AnnotationElect, flotillav1.LabelEnabled)
		patch := client.MergeFrom(pod.DeepCopy())
		pod.Status.Reason, pod.Status.Message = flotillav1.ReasonNotElected, msg
		if err := s.Writer.Status().Patch(ctx, pod, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("patching the status of pod %s: %w", pod.Name, err)
		}
		if s.Recorder != nil {
			s.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, flotillav1.ReasonNotElected, "Bind", "%s", msg)
		}
	}
	return nil
}
