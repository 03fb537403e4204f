package placement

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// ClusterView is what the webhook knows of one secondary: its health, its virtual node's labels
// (the flotilla.dev/* keys a cluster selector matches) and its eligible nodes.
type ClusterView struct {
	Name   string
	Ready  bool
	Reason string
	Labels map[string]string
	Nodes  []NodeView
	// Cordoned and Taints are the cluster's virtual node's in the primary: a user's `kubectl
	// cordon` of it, or a NoSchedule taint a proxy does not tolerate, keeps new pods away as they
	// keep them from any node.
	Cordoned bool
	Taints   []corev1.Taint
	// Siblings counts the proxies of the pod's own controller (its ReplicaSet, StatefulSet, Job)
	// the cluster already holds or was just given: placement puts a workload's next replica among
	// the clusters with the fewest, so replicas spread as the primary's scheduler would spread
	// them over nodes.
	Siblings int
	// NoClaims says the cluster takes no claims of class flotilla (its registration's storage
	// class is none): a pod that uses one does not fit there.
	NoClaims bool
	// UnreachableFor is how long the cluster's virtual node has carried the failover taint (0:
	// it does not): a pod that would rather start afresh than wait for its data there
	// (flotilla.dev/on-volume-cluster-loss: recreate) leaves it once this reaches its failover bound.
	UnreachableFor time.Duration
	// Denied says why the pod's namespace may not use the cluster ("" when it may): it is not in
	// the namespace's cluster sets (Tenancy.Deny). A denied cluster is neither offered nor waited for.
	Denied string
	// NodesUnknown: the view has no node detail (flotillactl sees the virtual nodes only), so a
	// cluster that passes the cluster-level checks fits; the secondary's scheduler judges the rest.
	NodesUnknown bool
	// FailoverTainted: the cluster's virtual node carries the failover taint, stamped or not.
	FailoverTainted bool
	// Draining: `flotillactl cluster drain` is moving the cluster's pods away (its virtual node's
	// flotilla.dev/draining): a pod that chose recreate leaves its data there at once.
	Draining bool
	// Lent is the room the secondary still lends this primary, by node resource name (pods, cpu,
	// memory, nvidia.com/gpu): its PrimaryAllowance less what its quotas count used; nil when it
	// lends without limit. A pod that needs more waits for this cluster rather than being sent
	// there to be refused (the secondary's quotas refuse it anyway).
	Lent corev1.ResourceList
	// Devices are the cluster's devices (DRA), nil when not gathered: a pod whose claims request
	// devices fits only where the allocator finds them on a node that takes it.
	Devices *DeviceView
}

// UnreachableFor is how long a virtual node's failover taint has been there at now (0: none, or
// not stamped).
func UnreachableFor(taints []corev1.Taint, now time.Time) time.Duration {
	for _, t := range taints {
		if t.Key == flotillav1.TaintUnreachable && t.Effect == corev1.TaintEffectNoExecute && t.TimeAdded != nil {
			return max(now.Sub(t.TimeAdded.Time), time.Nanosecond)
		}
	}
	return 0
}

// dataLost says whether a pod leaves the cluster that holds its data (dataCluster) for fresh,
// empty claims elsewhere: it asked to (flotilla.dev/on-volume-cluster-loss: recreate) and that
// cluster is being drained, or has been unreachable for the pod's failover bound, the time after
// which its running pods were evicted too.
func dataLost(pod *corev1.Pod, dataCluster string, clusters []ClusterView) bool {
	if !translate.RecreatesOnVolumeClusterLoss(pod) {
		return false
	}
	bound, err := FailoverSeconds(pod)
	if err != nil {
		return false
	}
	for _, cl := range clusters {
		if cl.Name == dataCluster {
			return cl.Draining || cl.UnreachableFor > 0 && cl.UnreachableFor >= time.Duration(bound)*time.Second
		}
	}
	return false
}

// NodeView is one eligible node of a secondary with the resources still free on it.
type NodeView struct {
	Name   string
	Labels map[string]string
	Taints []corev1.Taint
	Free   corev1.ResourceList
	// Allocatable is the node's whole (nil: not known): a request above it never fits there.
	Allocatable corev1.ResourceList
}

// ClaimView is what admission knows of a PersistentVolumeClaim an elected pod uses.
type ClaimView struct {
	// Found says whether the claim exists (a pod may be created before its claim, as Kubernetes
	// allows: its delegate then waits for the real claim).
	Found bool
	// Class is its storage class.
	Class string
	// Cluster is the cluster that holds its data, once it is bound ("" before).
	Cluster string
}

// WithVirtualNode adds to a cluster's view what its virtual node in the primary says at now: a
// user's cordon, its taints, how long its failover taint has been there, and a drain under way.
func WithVirtualNode(v *ClusterView, n *corev1.Node, now time.Time) {
	v.Cordoned, v.Taints = n.Spec.Unschedulable, n.Spec.Taints
	v.UnreachableFor = UnreachableFor(n.Spec.Taints, now)
	v.FailoverTainted = FailoverTainted(n.Spec.Taints)
	_, v.Draining = n.Annotations[flotillav1.AnnotationDraining]
}

// FailoverTainted says whether taints hold the failover taint Flotilla puts on the virtual node of
// a secondary that stays unreachable (flotilla.dev/unreachable, NoExecute).
func FailoverTainted(taints []corev1.Taint) bool {
	for _, t := range taints {
		if t.Key == flotillav1.TaintUnreachable && t.Effect == corev1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}

// NodeReady says whether a node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
