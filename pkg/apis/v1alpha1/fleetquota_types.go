package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FleetQuotaSpec limits what the elected pods of its namespace may request over every secondary
// together (Hard) and in one secondary (Clusters).
type FleetQuotaSpec struct {
	// Hard is the most the namespace's elected pods may request over all secondaries: pods, cpu,
	// memory (or their requests.* names), any extended resource such as nvidia.com/gpu, and
	// requests.storage (of their claims of class flotilla).
	// +optional
	Hard corev1.ResourceList `json:"hard,omitempty"`
	// Clusters limits what they may request in one secondary each.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	Clusters []ClusterQuota `json:"clusters,omitempty"`
}

// ClusterQuota is the most a namespace's elected pods may request in one secondary.
type ClusterQuota struct {
	// Name is the secondary's (its ClusterDetector's) name.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Hard is the limit there, named as in FleetQuotaSpec.Hard.
	Hard corev1.ResourceList `json:"hard"`
}

// ClusterQuotaStatus is what the elected pods use in one secondary, against its limit.
type ClusterQuotaStatus struct {
	Name string `json:"name"`
	// +optional
	Hard corev1.ResourceList `json:"hard,omitempty"`
	// +optional
	Used corev1.ResourceList `json:"used,omitempty"`
}

// FleetQuotaStatus is the usage Flotilla counts against the quota.
type FleetQuotaStatus struct {
	// Used is what the namespace's elected pods past the quota gate request, over all secondaries
	// (the resources Hard names).
	// +optional
	Used corev1.ResourceList `json:"used,omitempty"`
	// Clusters is the usage per secondary, for each one the pods are in or Spec.Clusters names.
	// +optional
	// +listType=map
	// +listMapKey=name
	Clusters []ClusterQuotaStatus `json:"clusters,omitempty"`
	// Waiting is how many elected pods wait for room in this quota.
	// +optional
	Waiting int32 `json:"waiting,omitempty"`
	// Summary is used/hard for each resource Hard names, e.g. "pods 100/100, cpu 40/64".
	// +optional
	Summary string `json:"summary,omitempty"`
	// ObservedGeneration is the generation this status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Exhausted (some resource is at its limit, overall or in a cluster).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// FleetQuota limits how much of the fleet a namespace's elected pods may use: overall, and per
// secondary. A pod that would exceed it waits Pending behind the flotilla.dev/quota scheduling
// gate, saying why, and starts when room frees.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fq,categories=flotilla
// +kubebuilder:printcolumn:name="Used",type=string,JSONPath=`.status.summary`
// +kubebuilder:printcolumn:name="Waiting",type=integer,JSONPath=`.status.waiting`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FleetQuota struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FleetQuotaSpec   `json:"spec,omitempty"`
	Status FleetQuotaStatus `json:"status,omitempty"`
}

// FleetQuotaList is a list of FleetQuotas.
// +kubebuilder:object:root=true
type FleetQuotaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FleetQuota `json:"items"`
}

func init() {
	SchemeBuilder.Register(&FleetQuota{}, &FleetQuotaList{})
}
