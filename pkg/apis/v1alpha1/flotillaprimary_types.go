package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FlotillaPrimarySpec says which primary this secondary serves, and under which name.
type FlotillaPrimarySpec struct {
	// ClusterName is the name the primary gave this secondary (its virtual node is flotilla-<name>).
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=54
	ClusterName string `json:"clusterName"`
	// ServiceAccount is the identity the primary uses here, when registered by `flotillactl cluster join`.
	// +optional
	ServiceAccount string `json:"serviceAccount,omitempty"`
}

// FlotillaPrimary lives in a secondary, named by the primary's ID (the UID of the primary's
// kube-system namespace). Everything that primary creates here is owned by it, so deleting it
// removes the primary's whole footprint, and nothing in the secondary can adopt those objects.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=flotilla
// +kubebuilder:printcolumn:name="Cluster Name",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Service Account",type=string,JSONPath=`.spec.serviceAccount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FlotillaPrimary struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec FlotillaPrimarySpec `json:"spec,omitempty"`
}

// FlotillaPrimaryList is a list of FlotillaPrimaries.
// +kubebuilder:object:root=true
type FlotillaPrimaryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FlotillaPrimary `json:"items"`
}

func init() {
	SchemeBuilder.Register(&FlotillaPrimary{}, &FlotillaPrimaryList{})
}
