package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OverrideSpec is an ordered list of rules, each changing some objects in some clusters.
type OverrideSpec struct {
	// Rules apply in order; a later rule sees what an earlier one changed.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Rules []OverrideRule `json:"rules"`
}

// OverrideRule says which objects, in which clusters, and what changes.
type OverrideRule struct {
	// Name names the rule in the status, Events and `flotillactl render`.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Name string `json:"name,omitempty"`
	// Targets are the objects the rule changes: any that one target matches.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Targets []OverrideTarget `json:"targets"`
	// Clusters are the secondaries where it changes them (none given: every secondary).
	// +optional
	Clusters OverrideClusters `json:"clusters,omitempty"`
	// Containers limits image, env, command, args and resources to the containers of these names
	// (none given: every container, init containers included).
	// +optional
	// +listType=set
	Containers []string `json:"containers,omitempty"`
	// Image rewrites the containers' image, each part on its own.
	// +optional
	Image *ImageOverride `json:"image,omitempty"`
	// Env adds, replaces or removes environment variables, in order.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Env []EnvOverride `json:"env,omitempty"`
	// Command and Args replace the containers' command and arguments.
	// +optional
	Command []string `json:"command,omitempty"`
	// +optional
	Args []string `json:"args,omitempty"`
	// Resources replaces the containers' requests and limits of the resources it names.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// Labels and Annotations are set on the object (an empty value removes the key).
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// Replicas sets a replicated workload's replicas (Deployment, StatefulSet, ReplicaSet).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`
	// JSONPatch is an RFC 6902 patch of the object, for anything else; applied last.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	JSONPatch []JSONPatchOperation `json:"jsonPatch,omitempty"`
}

// OverrideTarget matches objects by kind and by name, labels or (for elected pods) owner.
type OverrideTarget struct {
	// Kind is the object's kind: Pod (an elected pod's delegate), or a kind a Replicator copies
	// (Deployment, ConfigMap, Service..., or a custom resource of its resources, with APIGroup).
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// APIGroup is the kind's API group. Empty: Pod, or the group of the kind Flotilla handles
	// by that name (apps for Deployment); a custom resource's kind needs its group
	// (monitoring.coreos.com for a ServiceMonitor).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	APIGroup string `json:"apiGroup,omitempty"`
	// Names are the objects' names (none given: any name).
	// +optional
	// +listType=set
	Names []string `json:"names,omitempty"`
	// Selector matches the objects' labels.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Owner matches an elected pod by the workload that owns it: a Deployment (through its
	// ReplicaSet), a StatefulSet, a Job, a DaemonSet.
	// +optional
	Owner *OwnerMatch `json:"owner,omitempty"`
}

// OwnerMatch is a workload by kind and name.
type OwnerMatch struct {
	// +kubebuilder:validation:Enum=Deployment;ReplicaSet;StatefulSet;Job;DaemonSet
	Kind string `json:"kind"`
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// OverrideClusters selects secondaries by name and by their virtual node's labels
// (flotilla.dev/cluster, flotilla.dev/region, flotilla.dev/zone...).
type OverrideClusters struct {
	// +optional
	// +listType=set
	Names []string `json:"names,omitempty"`
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// ImageOverride rewrites parts of an image reference ([registry/]repository[:tag][@digest]); a
// part left empty is kept.
type ImageOverride struct {
	// Registry replaces the registry host (docker.io when the image names none).
	// +optional
	Registry string `json:"registry,omitempty"`
	// Repository replaces the path after the registry.
	// +optional
	Repository string `json:"repository,omitempty"`
	// Tag replaces the tag (and drops a digest).
	// +optional
	Tag string `json:"tag,omitempty"`
	// Digest replaces the digest (sha256:...).
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	Digest string `json:"digest,omitempty"`
}

// EnvOverride is one change to the containers' environment.
type EnvOverride struct {
	// +kubebuilder:validation:Enum=Add;Replace;Remove
	Op string `json:"op"`
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +optional
	Value string `json:"value,omitempty"`
}

// JSONPatchOperation is one RFC 6902 operation.
type JSONPatchOperation struct {
	// +kubebuilder:validation:Enum=add;remove;replace;move;copy;test
	Op string `json:"op"`
	// +kubebuilder:validation:MinLength=1
	Path string `json:"path"`
	// +optional
	From string `json:"from,omitempty"`
	// +optional
	Value *apiextensionsv1.JSON `json:"value,omitempty"`
}

// OverrideStatus says whether the rules apply.
type OverrideStatus struct {
	// ObservedGeneration is the generation this status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Applied (False with the rule, object and cluster a rule could not apply to).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Override changes, per cluster, what Flotilla sends to secondaries from its namespace: elected
// pods' delegates and Replicators' copies. ClusterOverrides apply first, then the namespace's
// Overrides, each by name, each's rules in order.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fov,categories=flotilla
// +kubebuilder:printcolumn:name="Applied",type=string,JSONPath=`.status.conditions[?(@.type=="Applied")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Override struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   OverrideSpec   `json:"spec"`
	Status OverrideStatus `json:"status,omitempty"`
}

// OverrideList is a list of Overrides.
// +kubebuilder:object:root=true
type OverrideList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Override `json:"items"`
}

// ClusterOverride is the admin's Override for every namespace, applied before theirs.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=fcov,categories=flotilla
// +kubebuilder:printcolumn:name="Applied",type=string,JSONPath=`.status.conditions[?(@.type=="Applied")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterOverride struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   OverrideSpec   `json:"spec"`
	Status OverrideStatus `json:"status,omitempty"`
}

// ClusterOverrideList is a list of ClusterOverrides.
// +kubebuilder:object:root=true
type ClusterOverrideList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterOverride `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Override{}, &OverrideList{}, &ClusterOverride{}, &ClusterOverrideList{})
}
