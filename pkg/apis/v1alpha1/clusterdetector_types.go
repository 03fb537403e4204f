package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterStatus is the health of a registered cluster, as plumber users know it.
// +kubebuilder:validation:Enum=Running;Unknown
type ClusterStatus string

const (
	// ClusterRunning means the cluster answered its last probes.
	ClusterRunning ClusterStatus = "Running"
	// ClusterUnknown means the cluster is not answering, or cannot be used; Reason says why.
	ClusterUnknown ClusterStatus = "Unknown"
)

// ClusterDetectorSpec says which kubeconfig entries a cluster was registered with.
type ClusterDetectorSpec struct {
	// Context is the context of the registration kubeconfig (Secret flotilla-system/kubeconfig).
	Context string `json:"context"`
	// Cluster is the context's raw kubeconfig cluster entry.
	// +optional
	Cluster string `json:"cluster,omitempty"`
	// User is the context's raw kubeconfig user entry.
	// +optional
	User string `json:"user,omitempty"`
}

// ClusterDetectorStatus is what Flotilla last saw of the cluster.
type ClusterDetectorStatus struct {
	// ClusterStatus is Running or Unknown.
	// +optional
	ClusterStatus ClusterStatus `json:"clusterStatus,omitempty"`
	// Reason is a CamelCase word saying why the cluster is Unknown (empty when Running).
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message says the same to a person.
	// +optional
	Message string `json:"message,omitempty"`
	// ClusterID is the UID of the cluster's kube-system namespace: its identity.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`
	// VirtualNode is the name of the cluster's node in the primary (secondaries only).
	// +optional
	VirtualNode string `json:"virtualNode,omitempty"`
	// StorageClass is the StorageClass the cluster gives the real claims of claims of class
	// flotilla: its registration's setting (flotilla.dev/storage-classes on the registration
	// Secret), "none" when it takes none; empty for its default StorageClass.
	StorageClass string `json:"storageClass,omitempty"`
	// Mode is how the manager reaches the cluster: Pull through the tunnel its agent holds (the
	// registration Secret's flotilla.dev/cluster-modes), empty when it dials the cluster.
	// +optional
	Mode string `json:"mode,omitempty"`
	// Tunnel is the state of a pulled cluster's tunnel, as the leader last saw it.
	// +optional
	Tunnel *TunnelStatus `json:"tunnel,omitempty"`
	// KubernetesVersion is the cluster's API server version.
	// +optional
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// NodeCount is the number of nodes in the cluster.
	// +optional
	NodeCount int32 `json:"nodeCount,omitempty"`
	// Capacity is the sum of allocatable resources over the cluster's eligible nodes.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Allocatable is Capacity less the requests of pods that are not this primary's delegates.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// LargestFree is, per resource, the most free on one node: the most one pod may ask for there
	// now, where Allocatable may be spread over many nodes (8 GPUs free as 8 nodes of one run no
	// pod that needs 4). Every pod counted, this primary's delegates included.
	// +optional
	LargestFree corev1.ResourceList `json:"largestFree,omitempty"`
	// Devices are the cluster's devices (Dynamic Resource Allocation), per DeviceClass: how many
	// its ResourceSlices publish that the class selects, and how many no claim holds.
	// +listType=map
	// +listMapKey=class
	// +optional
	Devices []DeviceClassStatus `json:"devices,omitempty"`
	// DevicesUnknown says why the cluster's devices are not known, and pods that claim devices
	// do not go there (it does not serve resource.k8s.io/v1, or Flotilla may not read it there).
	// +optional
	DevicesUnknown string `json:"devicesUnknown,omitempty"`
	// MissingFeatures are the APIs Flotilla uses that the cluster does not serve (read from its
	// discovery with its version, so they change when it is upgraded), each with what Flotilla
	// does without it there.
	// +optional
	MissingFeatures []string `json:"missingFeatures,omitempty"`
	// TokenExpirationTime is when the credential Flotilla uses there expires (tokens only).
	// +optional
	TokenExpirationTime *metav1.Time `json:"tokenExpirationTime,omitempty"`
	// LastProbeTime is when the cluster was last probed.
	// +optional
	LastProbeTime *metav1.Time `json:"lastProbeTime,omitempty"`
	// ObservedGeneration is the generation this status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready (the cluster answers), Registered (its registration is usable), and on the
	// primary's ClusterDetector KubeconfigValid (the registration Secret parses).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DeviceClassStatus counts a cluster's devices of one DeviceClass.
type DeviceClassStatus struct {
	// Class is the DeviceClass's name.
	Class string `json:"class"`
	// Total counts the devices its ResourceSlices publish that the class's selectors match.
	Total int32 `json:"total"`
	// Free counts those no ResourceClaim holds.
	Free int32 `json:"free"`
}

// ModePull is ClusterDetectorStatus.Mode of a cluster reached through its agent's tunnel.
const ModePull = "Pull"

// TunnelStatus is the state of a pulled cluster's tunnel.
type TunnelStatus struct {
	// Connected says whether the cluster's agent holds a session with the leader.
	Connected bool `json:"connected"`
	// Since is when the current session opened, or when the last one closed.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// RoundTrip is the last keepalive's round trip.
	// +optional
	RoundTrip *metav1.Duration `json:"roundTrip,omitempty"`
	// Connects counts the sessions the leader accepted since it started; past the first, reconnects.
	// +optional
	Connects int32 `json:"connects,omitempty"`
	// LastError is why the last session ended, or why the last agent claiming the cluster was refused.
	// +optional
	LastError string `json:"lastError,omitempty"`
	// CredentialExpires is when the credential the connected agent proved itself with expires; the
	// manager gives the agent a new one before then.
	// +optional
	CredentialExpires *metav1.Time `json:"credentialExpires,omitempty"`
}

// ClusterDetector is one registered cluster, the primary included, as plumber named it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cd;cds,categories=flotilla
// +kubebuilder:printcolumn:name="Context",type=string,JSONPath=`.spec.context`
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="User",type=string,JSONPath=`.spec.user`
// +kubebuilder:printcolumn:name="ClusterStatus",type=string,JSONPath=`.status.clusterStatus`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,priority=1
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.virtualNode`,priority=1
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.status.mode`,priority=1
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.kubernetesVersion`,priority=1
// +kubebuilder:printcolumn:name="StorageClass",type=string,JSONPath=`.status.storageClass`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterDetector struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterDetectorSpec   `json:"spec,omitempty"`
	Status ClusterDetectorStatus `json:"status,omitempty"`
}

// ClusterDetectorList is a list of ClusterDetectors.
// +kubebuilder:object:root=true
type ClusterDetectorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterDetector `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ClusterDetector{}, &ClusterDetectorList{})
}
