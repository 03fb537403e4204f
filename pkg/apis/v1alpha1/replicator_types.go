package v1alpha1

import (
	"encoding/json"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Placement says how a Replicator's Deployment reaches its clusters.
// +kubebuilder:validation:Enum=Replicate;Elect
type Placement string

const (
	// PlacementReplicate applies a full copy of every resource in each cluster (plumber's way).
	PlacementReplicate Placement = "Replicate"
	// PlacementElect keeps the Deployment in the primary only, its pods elected to the targets.
	PlacementElect Placement = "Elect"
)

// plumber's status values.
const (
	SyncedTrue        = "synced"
	SyncedFalse       = "not synced"
	ApplyStatusOK     = "applied"
	ApplyStatusFailed = "not applied"
	// ApplyStatusDependencyCopy: in a secondary, Flotilla's dependency reflection copied the same
	// object first for the elected pods that use it; it keeps it (one owner per copy) and the
	// Replicator neither overwrites nor deletes it.
	ApplyStatusDependencyCopy = "dependency copy"
)

// ReplicatorSpec is plumber's Replicator spec (same fields, same meanings) plus placement,
// resources and tls.
//
// +kubebuilder:validation:XValidation:rule="!self.replicationNamespace.startsWith('kube-') && !(self.replicationNamespace in ['default', 'flotilla-system'])",message="replicationNamespace must not be default, flotilla-system or a kube-* namespace: the Replicator owns its namespace and may delete it"
// +kubebuilder:validation:XValidation:rule="!has(self.deploymentSpec) || (has(self.deploymentName) && size(self.deploymentName) > 0)",message="deploymentSpec needs deploymentName"
// +kubebuilder:validation:XValidation:rule="!has(self.deploymentSpec) || size(self.deploymentSpec.template.spec.containers) > 0",message="deploymentSpec.template.spec.containers must list at least one container"
// +kubebuilder:validation:XValidation:rule="!has(self.configMapData) || (has(self.configMapName) && size(self.configMapName) > 0)",message="configMapData needs configMapName"
// +kubebuilder:validation:XValidation:rule="!has(self.serviceSpec) || (has(self.serviceName) && size(self.serviceName) > 0)",message="serviceSpec needs serviceName"
// +kubebuilder:validation:XValidation:rule="!has(self.ingressSpec) || (has(self.ingressName) && size(self.ingressName) > 0)",message="ingressSpec needs ingressName"
// +kubebuilder:validation:XValidation:rule="!has(self.ingressSecureEnabled) || !self.ingressSecureEnabled || (has(self.ingressSpec) && has(self.ingressSpec.rules) && size(self.ingressSpec.rules) > 0 && self.ingressSpec.rules.all(r, has(r.host) && size(r.host) > 0))",message="ingressSecureEnabled needs ingressSpec.rules with a host each: the server certificate covers those hosts"
// +kubebuilder:validation:XValidation:rule="!has(self.targetCluster) || !self.targetCluster.exists(t, t == '*') || size(self.targetCluster) == 1",message="targetCluster '*' means every secondary and cannot be combined with names"
// +kubebuilder:validation:XValidation:rule="!has(self.placement) || self.placement != 'Elect' || has(self.deploymentSpec)",message="placement Elect needs a deploymentSpec: it is the Deployment whose pods are elected"
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || self.resources.all(r, !has(r.metadata.namespace) || r.metadata.namespace == self.replicationNamespace)",message="resources must be in replicationNamespace (or name no namespace)"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.placement) || self.placement == 'Replicate'",message="rollout needs placement Replicate: with Elect the Deployment lives in the primary only"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || (has(self.targetCluster) && self.targetCluster == ['*']) || self.rollout.waves.all(w, w.clusters.all(c, c == 'primary' || (has(self.targetCluster) && c in self.targetCluster)))",message="rollout.waves may name only clusters of targetCluster, spelled as there, or primary"
type ReplicatorSpec struct {
	// TargetCluster lists the clusters to replicate to: ClusterDetector names, cluster names,
	// raw <cluster>.<user> names or kubeconfig context names. Empty: the primary only (as
	// plumber). ["*"]: every secondary. The primary always gets the resources.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	TargetCluster []string `json:"targetCluster,omitempty"`

	// Placement is Replicate (default: a full copy in every cluster) or Elect (the Deployment
	// stays in the primary and its pods are elected to the target clusters).
	// +optional
	// +kubebuilder:default=Replicate
	Placement Placement `json:"placement,omitempty"`

	// ReplicationNamespace is where every resource goes, in every cluster; created when missing.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ReplicationNamespace string `json:"replicationNamespace"`

	// DeploymentName names the Deployment of DeploymentSpec.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	DeploymentName string `json:"deploymentName,omitempty"`
	// DeploymentSpec is the Deployment's spec. A missing selector and template labels are derived
	// from the Replicator; a live Deployment's selector is kept.
	// +optional
	DeploymentSpec *ReplicatedDeploymentSpec `json:"deploymentSpec,omitempty"`

	// ConfigMapName names the ConfigMap of ConfigMapData.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ConfigMapName string `json:"configMapName,omitempty"`
	// ConfigMapData is the ConfigMap's data.
	// +optional
	ConfigMapData map[string]string `json:"configMapData,omitempty"`

	// ServiceName names the Service of ServiceSpec.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	ServiceName string `json:"serviceName,omitempty"`
	// ServiceSpec is the Service's spec; without a selector it selects the Deployment's pods.
	// +optional
	ServiceSpec *corev1.ServiceSpec `json:"serviceSpec,omitempty"`

	// IngressName names the Ingress of IngressSpec.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	IngressName string `json:"ingressName,omitempty"`
	// IngressSpec is the Ingress's spec.
	// +optional
	IngressSpec *networkingv1.IngressSpec `json:"ingressSpec,omitempty"`
	// IngressSecureEnabled serves the Ingress over TLS with client certificates: one CA for all
	// clusters, a server certificate for every host of the rules, a client certificate.
	// +optional
	IngressSecureEnabled bool `json:"ingressSecureEnabled,omitempty"`

	// TLS tunes IngressSecureEnabled.
	// +optional
	TLS *ReplicatorTLS `json:"tls,omitempty"`

	// Resources are further namespaced manifests (at most MaxResources) of any kind the primary
	// serves, custom resources included (Flotilla's own kinds aside). In a secondary, a kind it does
	// not serve is a condition naming it; one the joined identity may not write there is a kind its
	// admin has not allowed (flotillactl cluster join --kinds).
	// +optional
	Resources Manifests `json:"resources,omitempty"`

	// ReplicateCRDs applies, in each secondary, the primary's CustomResourceDefinition of every
	// custom kind of resources before them, where the secondary's admin allowed it (cluster join
	// --kinds ... --crds). A definition is created or updated, never deleted (that would delete
	// every object of the kind there); one the secondary installed itself is left alone.
	// +optional
	ReplicateCRDs bool `json:"replicateCRDs,omitempty"`

	// Rollout orders the clusters in waves: a new generation of the spec reaches a wave only once
	// every earlier wave is Healthy with it. Without it every cluster gets a change at once.
	// +optional
	Rollout *Rollout `json:"rollout,omitempty"`
}

// RolloutPrimary names the primary in rollout waves (and in the status).
const RolloutPrimary = "primary"

// Rollout is the order in which a change of a Replicator reaches its clusters.
//
// +kubebuilder:validation:XValidation:rule="self.waves.all(w, w.clusters.all(c, self.waves.filter(x, c in x.clusters).size() == 1))",message="a cluster may be in one wave only"
type Rollout struct {
	// Waves are applied in order. The clusters of targetCluster named in no wave, and the primary
	// unless named, form a last wave of their own.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	Waves []RolloutWave `json:"waves"`
}

// RolloutWave is a set of clusters that get a change together.
type RolloutWave struct {
	// Clusters are names of targetCluster, spelled as there, or primary.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	Clusters []string `json:"clusters"`
}

// MaxResources is how many manifests a Replicator's resources may hold.
const MaxResources = 100

// Manifests are a Replicator's further resources.
//
// +kubebuilder:validation:MaxItems=100
// +kubebuilder:validation:XValidation:rule="self.all(r, !r.apiVersion.startsWith('flotilla.dev/') && !r.apiVersion.contains('.flotilla.dev/'))",message="resources may not hold Flotilla's own kinds (flotilla.dev)"
// +kubebuilder:validation:XValidation:rule="self.all(r, !(r.kind in ['Namespace', 'CustomResourceDefinition']))",message="resources are namespaced objects of the replication namespace: no Namespace or CustomResourceDefinition (replicateCRDs copies the definitions of custom kinds)"
type Manifests []Manifest

// Manifest is one Kubernetes object of Resources: its kind and metadata are in the schema (so that
// CEL can check them at apply time), the rest is kept as written.
// +kubebuilder:pruning:PreserveUnknownFields
type Manifest struct {
	// +kubebuilder:validation:MaxLength=253
	APIVersion string `json:"apiVersion"`
	// +kubebuilder:validation:MaxLength=63
	Kind     string           `json:"kind"`
	Metadata ManifestMetadata `json:"metadata"`
	// Raw is the whole manifest as written (filled by UnmarshalJSON; not part of the schema).
	Raw []byte `json:"-"`
}

// ManifestMetadata is what the schema knows of a manifest's metadata.
// +kubebuilder:pruning:PreserveUnknownFields
type ManifestMetadata struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// UnmarshalJSON keeps the whole manifest in Raw.
func (m *Manifest) UnmarshalJSON(b []byte) error {
	type plain Manifest
	if err := json.Unmarshal(b, (*plain)(m)); err != nil {
		return err //nolint:wrapcheck // the decoder's own error
	}
	m.Raw = append([]byte(nil), b...)
	return nil
}

// MarshalJSON writes the manifest as it was read.
func (m Manifest) MarshalJSON() ([]byte, error) {
	if m.Raw != nil {
		return m.Raw, nil
	}
	type plain Manifest
	return json.Marshal(plain(m)) //nolint:wrapcheck // the encoder's own error
}

// ReplicatedDeploymentSpec is a Deployment's spec whose selector may be left out.
type ReplicatedDeploymentSpec struct {
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// Selector defaults to labels derived from the Replicator (or the live Deployment's).
	// +optional
	Selector *metav1.LabelSelector  `json:"selector,omitempty"`
	Template corev1.PodTemplateSpec `json:"template"`
	// +optional
	Strategy appsv1.DeploymentStrategy `json:"strategy,omitempty"`
	// +optional
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`
	// +optional
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`
	// +optional
	Paused bool `json:"paused,omitempty"`
	// +optional
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`
}

// ReplicatorTLS tunes the TLS material of IngressSecureEnabled.
type ReplicatorTLS struct {
	// IssuerRef makes cert-manager (in the primary) issue the server and client certificates
	// instead of Flotilla's own CA.
	// +optional
	IssuerRef *IssuerRef `json:"issuerRef,omitempty"`
	// ReplicateClientSecret also copies cli-secret (the client key) to every target: anyone who
	// reads Secrets there can then act as the client everywhere.
	// +optional
	ReplicateClientSecret bool `json:"replicateClientSecret,omitempty"`
}

// IssuerRef names a cert-manager Issuer or ClusterIssuer.
type IssuerRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Kind is Issuer (in the replication namespace) or ClusterIssuer.
	// +optional
	// +kubebuilder:default=Issuer
	// +kubebuilder:validation:Enum=Issuer;ClusterIssuer
	Kind string `json:"kind,omitempty"`
	// +optional
	// +kubebuilder:default=cert-manager.io
	Group string `json:"group,omitempty"`
}

// AppliedResource is one resource in one cluster (plumber's applied[]).
type AppliedResource struct {
	Cluster string `json:"cluster"`
	// APIVersion is the object's group and version (empty in what older versions recorded: the
	// kind's of ReplicatedKinds).
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	// ApplyStatus is "applied", "not applied", or "dependency copy" (in a secondary, Flotilla's
	// dependency reflection holds it for the elected pods using it: left to it).
	ApplyStatus string `json:"applyStatus"`
	// Message says why it was not applied.
	// +optional
	Message string `json:"message,omitempty"`
}

// ClusterSync is the state of one cluster of a Replicator.
type ClusterSync struct {
	// Name is the cluster's name ("primary" names the primary's own).
	Name string `json:"name"`
	// Role is primary or secondary.
	Role string `json:"role"`
	// Synced says whether every resource is applied there.
	Synced bool `json:"synced"`
	// Replicas and ReadyReplicas of the Deployment there (with placement Elect: its delegates there).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// Message says what failed.
	// +optional
	Message string `json:"message,omitempty"`
	// LastSyncTime is when everything was last applied there.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`
	// ObservedGeneration is the Replicator's generation last applied there (with a rollout, a
	// cluster whose wave has not come yet keeps an older one).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Healthy says every object judged there is healthy (see Health).
	// +optional
	Healthy bool `json:"healthy,omitempty"`
	// Health is, for each object whose health is judged there, whether it is healthy and why.
	// +optional
	Health []ObjectHealth `json:"health,omitempty"`
	// Held says the cluster waits for its rollout wave: nothing is applied there meanwhile.
	// +optional
	Held bool `json:"held,omitempty"`
	// Wave is the cluster's rollout wave, from 1 (0: no rollout).
	// +optional
	Wave int32 `json:"wave,omitempty"`
}

// ObjectHealth is the health of one replicated object in one cluster.
type ObjectHealth struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Healthy: a Deployment, StatefulSet or DaemonSet has its replicas updated and available at
	// its latest generation; a Service that
	// selects pods has a ready endpoint; an Ingress of a class the cluster has is admitted (has a
	// load-balancer address); a TLS Secret holds a certificate that parses and has not expired.
	Healthy bool `json:"healthy"`
	// Reason is a CamelCase word: Available, Progressing, ImagePullFailed, ContainersFailing,
	// ProgressDeadlineExceeded, NoEndpoints, NotAdmitted, NoIngressController, Expired, Invalid...
	Reason string `json:"reason"`
	// Failing says the object will not become healthy by waiting (a rollout blocks on it).
	// +optional
	Failing bool `json:"failing,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// ReplicatorStatus is plumber's status (applied, synced) plus conditions and per-cluster state.
type ReplicatorStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Synced is "synced" when every resource is applied in every cluster, else "not synced".
	// +optional
	Synced string `json:"synced,omitempty"`
	// ClusterCount is "<synced clusters>/<clusters>", the primary included.
	// +optional
	ClusterCount string `json:"clusterCount,omitempty"`
	// Applied lists every resource in every cluster.
	// +optional
	Applied []AppliedResource `json:"applied,omitempty"`
	// Clusters is the state of each cluster.
	// +optional
	Clusters []ClusterSync `json:"clusters,omitempty"`
	// Conditions: Ready (the Deployment's pods are ready everywhere), Synced (everything applied
	// everywhere), Healthy (what is applied is healthy everywhere), Progressing (with a rollout).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Replicator replicates a namespace's ConfigMap, Deployment, Service, Ingress, TLS Secrets and
// further resources to chosen clusters, and keeps them true (plumber-compatible).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=rep
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.synced`
// +kubebuilder:printcolumn:name="Clusters",type=string,JSONPath=`.status.clusterCount`
// plumber's columns first (scripts read them), then what Flotilla adds.
// +kubebuilder:printcolumn:name="Healthy",type=string,JSONPath=`.status.conditions[?(@.type=="Healthy")].status`
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.replicationNamespace`,priority=1
// +kubebuilder:printcolumn:name="Placement",type=string,JSONPath=`.spec.placement`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Replicator struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ReplicatorSpec   `json:"spec,omitempty"`
	Status ReplicatorStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ReplicatorList is a list of Replicators.
type ReplicatorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Replicator `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Replicator{}, &ReplicatorList{})
}
