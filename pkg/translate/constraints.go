package translate

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
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
}

// HostPortKey names a container port in Constraints.HostPorts.
func HostPortKey(container string, p corev1.ContainerPort) string {
	proto := p.Protocol
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	return fmt.Sprintf("%s/%d/%s", container, p.ContainerPort, proto)
}
