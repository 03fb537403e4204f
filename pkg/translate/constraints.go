package translate

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// Constraints are the user's scheduling constraints, moved from the proxy to the delegate.
type Constraints struct {
	NodeSelector              map[string]string                 `json:"nodeSelector,omitempty"`
	Affinity                  *corev1.Affinity                  `json:"affinity,omitempty"`
	Tolerations               []corev1.Toleration               `json:"tolerations,omitempty"`
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	HostNetwork               bool                              `json:"hostNetwork,omitempty"`
	// HostPorts maps "container/containerPort/protocol" to the host port the delegate keeps.
	HostPorts map[string]int32 `json:"hostPorts,omitempty"`
	// DataCluster is the cluster that holds the data of a claim the pod uses (DataClaim): the pod
	// goes only there, and waits while it is away.
	DataCluster string `json:"dataCluster,omitempty"`
	DataClaim   string `json:"dataClaim,omitempty"`
	// ResourceClaims and ContainerClaims are the pod's DRA claims, taken off the proxy
	// (TakeResourceClaims) and given back to its delegate.
	ResourceClaims  []corev1.PodResourceClaim         `json:"resourceClaims,omitempty"`
	ContainerClaims map[string][]corev1.ResourceClaim `json:"containerClaims,omitempty"`
	// Devices are what those claims request, by the pod's name for each claim: the spec of its
	// template, or of the claim it names, as the webhook read them (both are immutable), for
	// placement to judge each cluster's devices by.
	Devices map[string]resourcev1.ResourceClaimSpec `json:"devices,omitempty"`
	// ClaimCluster is the cluster where pods already use a claim this pod names (SharedClaim): a
	// claim is allocated once, in one cluster, so the pod goes only there.
	ClaimCluster string `json:"claimCluster,omitempty"`
	SharedClaim  string `json:"sharedClaim,omitempty"`
}

// ConstraintsOf reads what the webhook kept of a proxy for its delegate (its
// delegate-constraints annotation; none: the zero Constraints).
func ConstraintsOf(proxy *corev1.Pod) (Constraints, error) {
	var c Constraints
	if raw := proxy.Annotations[flotillav1.AnnotationDelegateConstraints]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &c); err != nil {
			return Constraints{}, fmt.Errorf("annotation %s does not parse: %w", flotillav1.AnnotationDelegateConstraints, err)
		}
	}
	return c, nil
}

// HostPortKey names a container port in Constraints.HostPorts.
func HostPortKey(container string, p corev1.ContainerPort) string {
	proto := p.Protocol
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	return fmt.Sprintf("%s/%d/%s", container, p.ContainerPort, proto)
}

// ClusterAffinity is a proxy's required node affinity on the clusters it may go to, by their
// virtual nodes' flotilla.dev/cluster label (nil for none).
func ClusterAffinity(clusters []string) *corev1.Affinity {
	if len(clusters) == 0 {
		return nil
	}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: flotillav1.LabelCluster, Operator: corev1.NodeSelectorOpIn, Values: clusters}},
		}}},
	}}
}
