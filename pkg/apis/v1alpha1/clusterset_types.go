package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterSetSpec says which secondaries are in the set: those it names and those its selector
// matches (over the labels of the cluster's virtual node: flotilla.dev/cluster, region, zone...).
type ClusterSetSpec struct {
	// Clusters names member clusters.
	// +optional
	// +listType=set
	Clusters []string `json:"clusters,omitempty"`
	// Selector selects member clusters by their virtual node's labels.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// ClusterSetStatus is the set as Flotilla last resolved it.
type ClusterSetStatus struct {
	// Clusters are the registered secondaries in the set now.
	// +optional
	// +listType=set
	Clusters []string `json:"clusters,omitempty"`
	// ObservedGeneration is the generation this status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Resolved (the selector parses; the named clusters are registered).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ClusterSet names a set of secondaries that namespaces bound to it (ClusterSetBinding) may use:
// the platform's answer to which clusters a team may run on.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=fcs,categories=flotilla
// +kubebuilder:printcolumn:name="Clusters",type=string,JSONPath=`.status.clusters`
// +kubebuilder:printcolumn:name="Resolved",type=string,JSONPath=`.status.conditions[?(@.type=="Resolved")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterSetSpec   `json:"spec,omitempty"`
	Status ClusterSetStatus `json:"status,omitempty"`
}

// ClusterSetList is a list of ClusterSets.
// +kubebuilder:object:root=true
type ClusterSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterSet `json:"items"`
}

// ClusterSetBindingSpec names the set its namespace may use.
type ClusterSetBindingSpec struct {
	// ClusterSet is the name of the ClusterSet.
	// +kubebuilder:validation:MinLength=1
	ClusterSet string `json:"clusterSet"`
}

// ClusterSetBinding lets its namespace use a ClusterSet: the elected pods, Replicators and
// exported Services of a namespace with bindings go only to the clusters of its sets.
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=fcsb,categories=flotilla
// +kubebuilder:printcolumn:name="ClusterSet",type=string,JSONPath=`.spec.clusterSet`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterSetBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ClusterSetBindingSpec `json:"spec"`
}

// ClusterSetBindingList is a list of ClusterSetBindings.
// +kubebuilder:object:root=true
type ClusterSetBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterSetBinding `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ClusterSet{}, &ClusterSetList{}, &ClusterSetBinding{}, &ClusterSetBindingList{})
}
