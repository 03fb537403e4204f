package v1alpha1

import "k8s.io/apimachinery/pkg/runtime/schema"

// ReplicatedKind is a kind of object a Replicator writes: its API coordinates, whether a
// Replicator's resources may hold it, and how Flotilla keeps its copies true. ReplicatedKinds is
// the one list of them: the CRD's rule on resources (generated into
// zz_generated.replicatedkinds.go by make generate), the webhook's rights check, the controller's
// kind lookups and a primary's rights in a secondary (pkg/access) are all derived from it, and the
// chart's RBAC is checked against it.
//
// +kubebuilder:object:generate=false
type ReplicatedKind struct {
	// Kind, Group, Version and Resource (plural, lower case) name the API it is written through.
	// The group is fixed by the kind: a manifest naming another group is refused.
	Kind, Group, Version, Resource string
	// Namespaced is true for every kind a Replicator writes: each object goes into its
	// replicationNamespace.
	Namespaced bool
	// InResources says a Replicator's resources may hold it. A kind that is not is one a
	// Replicator writes of its own accord (cert-manager's Certificate, for tls.issuerRef), listed
	// so that it is checked against its author's rights and pruned like the others.
	InResources bool
	// Watched says Flotilla watches what Replicators applied of this kind, in the primary and in
	// every secondary, and repairs an edit or a deletion at once; the other kinds are repaired by
	// the Replicator's periodic pass.
	Watched bool
	// WriteOnly says Flotilla never reads it in a secondary (Secrets: its identity there has no
	// get, list or watch on them). It is written blind and deleted by name.
	WriteOnly bool
	// PrimaryOnly says it is written in the primary only (a Certificate: cert-manager issues there
	// and the Secrets it fills are what secondaries get).
	PrimaryOnly bool
	// PodSpec is the path of the pod spec of a kind that makes pods (nil for the others): the
	// ServiceAccount its pods run as is checked before it is applied in a secondary.
	PodSpec []string
}

// ReplicatedKinds are the kinds a Replicator writes. Their order is the order the CRD's rule and
// its message name them in.
var ReplicatedKinds = []ReplicatedKind{
	{Kind: "ConfigMap", Version: "v1", Resource: "configmaps", Namespaced: true, InResources: true, Watched: true},
	{Kind: "Secret", Version: "v1", Resource: "secrets", Namespaced: true, InResources: true, WriteOnly: true},
	{Kind: "Service", Version: "v1", Resource: "services", Namespaced: true, InResources: true, Watched: true},
	{Kind: "Ingress", Group: "networking.k8s.io", Version: "v1", Resource: "ingresses", Namespaced: true, InResources: true, Watched: true},
	{Kind: "Deployment", Group: "apps", Version: "v1", Resource: "deployments", Namespaced: true, InResources: true, Watched: true, PodSpec: podTemplate},
	{Kind: "StatefulSet", Group: "apps", Version: "v1", Resource: "statefulsets", Namespaced: true, InResources: true, PodSpec: podTemplate},
	{Kind: "DaemonSet", Group: "apps", Version: "v1", Resource: "daemonsets", Namespaced: true, InResources: true, PodSpec: podTemplate},
	{Kind: "Job", Group: "batch", Version: "v1", Resource: "jobs", Namespaced: true, InResources: true, PodSpec: podTemplate},
	{Kind: "CronJob", Group: "batch", Version: "v1", Resource: "cronjobs", Namespaced: true, InResources: true,
		PodSpec: []string{"spec", "jobTemplate", "spec", "template", "spec"}},
	{Kind: "ServiceAccount", Version: "v1", Resource: "serviceaccounts", Namespaced: true, InResources: true},
	{Kind: "PodDisruptionBudget", Group: "policy", Version: "v1", Resource: "poddisruptionbudgets", Namespaced: true, InResources: true},
	{Kind: "HorizontalPodAutoscaler", Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers", Namespaced: true, InResources: true},
	{Kind: "NetworkPolicy", Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies", Namespaced: true, InResources: true},
	// cert-manager v1.20's API, written for tls.issuerRef.
	{Kind: "Certificate", Group: "cert-manager.io", Version: "v1", Resource: "certificates", Namespaced: true, PrimaryOnly: true},
}

// podTemplate is where a workload's pod spec is: spec.template.spec.
var podTemplate = []string{"spec", "template", "spec"}

// ReplicatedKindOf finds a kind of ReplicatedKinds by its name.
func ReplicatedKindOf(kind string) (ReplicatedKind, bool) {
	for _, k := range ReplicatedKinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return ReplicatedKind{}, false
}

// GroupVersionKind is the kind's group, version and kind.
func (k ReplicatedKind) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
}

// GroupResource is the kind's group and resource: what RBAC and a SubjectAccessReview name.
func (k ReplicatedKind) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: k.Group, Resource: k.Resource}
}

// GroupVersionResource is the kind's group, version and resource: what an informer lists.
func (k ReplicatedKind) GroupVersionResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: k.Group, Version: k.Version, Resource: k.Resource}
}
