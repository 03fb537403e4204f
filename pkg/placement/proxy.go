package placement

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// Rejection is an elected pod Flotilla cannot honour; its message says why.
type Rejection struct{ Message string }

func (r *Rejection) Error() string { return r.Message }

// Rejectf is a Rejection whose message is formatted as fmt.Sprintf does.
func Rejectf(format string, args ...any) *Rejection {
	return &Rejection{Message: fmt.Sprintf(format, args...)}
}

// FailoverSeconds is the pod's failover bound (flotilla.dev/failover-seconds, else the default):
// how long its proxy tolerates its cluster's failover taint before it is evicted.
func FailoverSeconds(pod *corev1.Pod) (int64, error) {
	v, ok := pod.Annotations[flotillav1.AnnotationFailoverSeconds]
	if !ok {
		return flotillav1.DefaultFailoverSeconds, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, Rejectf("annotation %s must be a whole number of seconds, not %q", flotillav1.AnnotationFailoverSeconds, v)
	}
	return n, nil
}

// CheckOnVolumeClusterLoss refuses a flotilla.dev/on-volume-cluster-loss the pod cannot have: a value
// other than wait or recreate, or recreate on a pod that also says it must never run twice
// (flotilla.dev/at-most-once): starting afresh elsewhere while the old pod may still run in the
// unreachable cluster is exactly what that forbids.
func CheckOnVolumeClusterLoss(pod *corev1.Pod) error {
	v, ok := pod.Annotations[flotillav1.AnnotationOnVolumeClusterLoss]
	if !ok {
		return nil
	}
	switch v {
	case flotillav1.OnVolumeClusterLossWait:
		return nil
	case flotillav1.OnVolumeClusterLossRecreate:
		if _, once := pod.Annotations[flotillav1.AnnotationAtMostOnce]; once {
			return Rejectf("annotations %s: %s and %s contradict each other: a pod that must never run twice cannot start again elsewhere while its cluster is unreachable",
				flotillav1.AnnotationOnVolumeClusterLoss, v, flotillav1.AnnotationAtMostOnce)
		}
		return nil
	}
	return Rejectf("annotation %s must be %s (the default: wait for the cluster that holds the data) or %s (start on fresh, empty claims elsewhere after the failover bound), not %q",
		flotillav1.AnnotationOnVolumeClusterLoss, flotillav1.OnVolumeClusterLossWait, flotillav1.OnVolumeClusterLossRecreate, v)
}

// DelegateConstraints are the pod's scheduling constraints that its delegate gets in its
// secondary: its node selector, affinity, host network and ports, the spreads not over clusters,
// and its tolerations but those of the primary's own node taints, which are the proxy's.
func DelegateConstraints(pod *corev1.Pod) translate.Constraints {
	c := translate.Constraints{NodeSelector: NodeSelectorInCluster(pod.Spec.NodeSelector), Affinity: pod.Spec.Affinity, HostNetwork: pod.Spec.HostNetwork}
	for _, t := range pod.Spec.TopologySpreadConstraints {
		if !AcrossClusters(t) {
			c.TopologySpreadConstraints = append(c.TopologySpreadConstraints, t)
		}
	}
	// Tolerations the DefaultTolerationSeconds plugin (or the user) put there for the primary's own
	// not-ready/unreachable taints are the proxy's business, not the delegate's.
	for _, t := range pod.Spec.Tolerations {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable || t.Key == flotillav1.TaintUnreachable ||
			t.Key == flotillav1.TaintVirtualNode {
			continue
		}
		c.Tolerations = append(c.Tolerations, t)
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, ctr := range list {
			for _, p := range ctr.Ports {
				if p.HostPort != 0 {
					if c.HostPorts == nil {
						c.HostPorts = map[string]int32{}
					}
					c.HostPorts[translate.HostPortKey(ctr.Name, p)] = p.HostPort
				}
			}
		}
	}
	return c
}

// OfVirtualNodes says whether a node label is one of the virtual nodes' (flotilla.dev/cluster,
// flotilla.dev/region, ...): in a node selector it chooses clusters, and no node of a secondary
// carries it.
func OfVirtualNodes(key string) bool {
	return strings.HasPrefix(key, flotillav1.GroupVersion.Group+"/")
}

// NodeSelectorInCluster is what of a pod's node selector its delegate keeps: every key but the
// virtual nodes' (nil when none is left).
func NodeSelectorInCluster(selector map[string]string) map[string]string {
	var out map[string]string
	for k, v := range selector {
		if OfVirtualNodes(k) {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

// ProxyTolerations are what every proxy tolerates: the virtual node's own taint, the primary's
// not-ready and unreachable taints for ever, and the failover taint for the pod's failover bound.
func ProxyTolerations(failover int64) []corev1.Toleration {
	return []corev1.Toleration{
		{Key: flotillav1.TaintVirtualNode, Operator: corev1.TolerationOpEqual, Value: flotillav1.TaintVirtualNodeValue, Effect: corev1.TaintEffectNoSchedule},
		// Without tolerationSeconds: a dead manager (lease lapsed, node Unknown) never evicts proxies.
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		// Failover: Flotilla taints the node of a secondary that stays unreachable.
		{Key: flotillav1.TaintUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &failover},
	}
}

// DataCluster refuses a claim whose storage cannot follow the pod (another class than flotilla)
// and returns the claim whose data decides the pod's cluster, and that cluster ("" when no claim
// is bound yet). Claims bound in two clusters cannot both be reached: refused.
func DataCluster(pod *corev1.Pod, claims map[string]ClaimView) (claim, cluster string, err error) {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		name := v.PersistentVolumeClaim.ClaimName
		c := claims[name]
		if !c.Found {
			continue
		}
		if c.Class != flotillav1.StorageClassRemote {
			return "", "", Rejectf("flotilla cannot elect this pod: volume %s uses claim %s of storage class %q, whose data stays in this cluster; only claims of class %s follow an elected pod",
				v.Name, name, c.Class, flotillav1.StorageClassRemote)
		}
		if c.Cluster == "" {
			continue
		}
		if cluster != "" && cluster != c.Cluster {
			return "", "", Rejectf("flotilla cannot elect this pod: the data of claim %s is in cluster %s and that of claim %s in cluster %s; a pod runs in one cluster",
				claim, cluster, name, c.Cluster)
		}
		claim, cluster = name, c.Cluster
	}
	return claim, cluster, nil
}

// DataHeldIn are the pod's claims whose data is in cluster (claimClusters: each claim's cluster, by
// namespace/name), which keep the pod there: none for a pod that chose to start afresh elsewhere
// (flotilla.dev/on-volume-cluster-loss: recreate).
func DataHeldIn(pod *corev1.Pod, claimClusters map[string]string, cluster string) []string {
	if translate.RecreatesOnVolumeClusterLoss(pod) {
		return nil
	}
	var held []string
	for _, claim := range translate.Claims(&pod.Spec) {
		if claimClusters[pod.Namespace+"/"+claim] == cluster {
			held = append(held, claim)
		}
	}
	return held
}
