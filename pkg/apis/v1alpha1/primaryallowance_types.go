package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PrimaryAllowanceSpec is the most one primary may use of this secondary.
type PrimaryAllowanceSpec struct {
	// Hard is the most the primary's pods may request here, over every namespace it manages:
	// pods, cpu, memory (or their requests.* names), and any extended resource such as
	// nvidia.com/gpu. A resource it does not name is not limited.
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="hard must name at least one resource"
	Hard corev1.ResourceList `json:"hard"`
}

// NamespaceAllowance is the part of the allowance one namespace of the primary holds: the hard
// limits of its ResourceQuota, which the secondary's API server enforces, and what it uses.
type NamespaceAllowance struct {
	Name string `json:"name"`
	// +optional
	Hard corev1.ResourceList `json:"hard,omitempty"`
	// +optional
	Used corev1.ResourceList `json:"used,omitempty"`
}

// PrimaryAllowanceStatus is what the primary uses against its allowance, as the secondary's
// ResourceQuotas count it.
type PrimaryAllowanceStatus struct {
	// Used sums what the primary's namespaces use (the resources Hard names).
	// +optional
	Used corev1.ResourceList `json:"used,omitempty"`
	// Namespaces are the primary's namespaces here, each with its part.
	// +optional
	// +listType=map
	// +listMapKey=name
	Namespaces []NamespaceAllowance `json:"namespaces,omitempty"`
	// Summary is used/hard for each resource Hard names, e.g. "pods 4/10, cpu 2/8".
	// +optional
	Summary string `json:"summary,omitempty"`
	// ObservedGeneration is the generation this status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Enforced (every namespace of the primary holds its part in a ResourceQuota, and
	// the parts add up to no more than Hard).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PrimaryAllowance lives in a secondary, named by a primary's ID as its FlotillaPrimary is: the
// secondary's admin states there the most that primary may use of this cluster. The primary's
// identity may read it, never write it. Flotilla's lender in this cluster holds the primary to it
// with a ResourceQuota in each namespace the primary manages, their hard limits adding up to no
// more than Hard; the primary shows the lesser of Hard and what is free as its virtual node's
// allocatable. Written by `flotillactl cluster join --allow`, edited by the admin afterwards.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=pa,categories=flotilla
// +kubebuilder:printcolumn:name="Used",type=string,JSONPath=`.status.summary`
// +kubebuilder:printcolumn:name="Enforced",type=string,JSONPath=`.status.conditions[?(@.type=="Enforced")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PrimaryAllowance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PrimaryAllowanceSpec   `json:"spec"`
	Status PrimaryAllowanceStatus `json:"status,omitempty"`
}

// PrimaryAllowanceList is a list of PrimaryAllowances.
// +kubebuilder:object:root=true
type PrimaryAllowanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PrimaryAllowance `json:"items"`
}

func init() {
	SchemeBuilder.Register(&PrimaryAllowance{}, &PrimaryAllowanceList{})
}
