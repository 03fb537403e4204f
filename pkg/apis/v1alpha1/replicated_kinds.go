package v1alpha1

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ReplicatedKind is a kind of object a Replicator writes: its API coordinates and how Flotilla
// keeps its copies true. A Replicator's resources may hold any namespaced kind the primary serves,
// custom resources included; ReplicatedKinds is the one list of the kinds Flotilla handles
// specially (its own fields, a watch, health read from their status, rights a joined identity
// holds in every secondary). The webhook's rights check, the controller's kind lookups and a
// primary's rights in a secondary (pkg/access) are derived from it, and the chart's RBAC is
// checked against it. Any other kind is a plain one (KindFor): applied, pruned, repaired by the
// periodic pass and judged by its status conditions.
//
// +kubebuilder:object:generate=false
type ReplicatedKind struct {
	// Kind, Group, Version and Resource (plural, lower case) name the API it is written through.
	// The group is fixed by the kind: a manifest naming another group is refused.
	Kind, Group, Version, Resource string
	// Namespaced is true for every kind a Replicator writes: each object goes into its
	// replicationNamespace.
	Namespaced bool
	// Watched says Flotilla watches what Replicators applied of this kind, in the primary and in
	// every secondary, and repairs an edit or a deletion at once; the other kinds are repaired by
	// the Replicator's periodic pass.
	Watched bool
	// WriteOnly says Flotilla never reads it in a secondary (Secrets: its identity there has no
	// get, list or watch on them). It is written blind and deleted by name.
	WriteOnly bool
	// PrimaryOnly says Flotilla writes it of its own accord in the primary only (a Certificate of
	// tls.issuerRef: cert-manager issues there and the Secrets it fills are what secondaries get),
	// so a joined identity holds no right to it in a secondary; one in a Replicator's resources
	// reaches a secondary whose admin allowed the kind (cluster join --kinds).
	PrimaryOnly bool
	// PodSpec is the path of the pod spec of a kind that makes pods (nil for the others): the
	// ServiceAccount its pods run as is checked before it is applied in a secondary.
	PodSpec []string
}

// ReplicatedKinds are the kinds a Replicator handles specially, in the order their rights are
// listed.
var ReplicatedKinds = []ReplicatedKind{
	{Kind: "ConfigMap", Version: "v1", Resource: "configmaps", Namespaced: true, Watched: true},
	{Kind: "Secret", Version: "v1", Resource: "secrets", Namespaced: true, WriteOnly: true},
	{Kind: "Service", Version: "v1", Resource: "services", Namespaced: true, Watched: true},
	{Kind: "Ingress", Group: "networking.k8s.io", Version: "v1", Resource: "ingresses", Namespaced: true, Watched: true},
	{Kind: "Deployment", Group: "apps", Version: "v1", Resource: "deployments", Namespaced: true, Watched: true, PodSpec: podTemplate},
	{Kind: "StatefulSet", Group: "apps", Version: "v1", Resource: "statefulsets", Namespaced: true, PodSpec: podTemplate},
	{Kind: "DaemonSet", Group: "apps", Version: "v1", Resource: "daemonsets", Namespaced: true, PodSpec: podTemplate},
	{Kind: "Job", Group: "batch", Version: "v1", Resource: "jobs", Namespaced: true, PodSpec: podTemplate},
	{Kind: "CronJob", Group: "batch", Version: "v1", Resource: "cronjobs", Namespaced: true,
		PodSpec: []string{"spec", "jobTemplate", "spec", "template", "spec"}},
	{Kind: "ServiceAccount", Version: "v1", Resource: "serviceaccounts", Namespaced: true},
	{Kind: "PodDisruptionBudget", Group: "policy", Version: "v1", Resource: "poddisruptionbudgets", Namespaced: true},
	{Kind: "HorizontalPodAutoscaler", Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers", Namespaced: true},
	{Kind: "NetworkPolicy", Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies", Namespaced: true},
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

// SpecialKind finds a kind of ReplicatedKinds by its group and name: a kind of the same name in
// another group (a custom resource called Certificate) is a plain kind.
func SpecialKind(gk schema.GroupKind) (ReplicatedKind, bool) {
	k, ok := ReplicatedKindOf(gk.Kind)
	if !ok || k.Group != gk.Group {
		return ReplicatedKind{}, false
	}
	return k, true
}

// KindFor is how a Replicator writes objects of a kind: its entry of ReplicatedKinds, or, for any
// other kind, a plain one of the resource and scope the serving API server maps it to (applied
// and pruned, read, repaired by the periodic pass).
func KindFor(gvk schema.GroupVersionKind, resource string, namespaced bool) ReplicatedKind {
	if k, ok := SpecialKind(gvk.GroupKind()); ok {
		return k
	}
	return ReplicatedKind{Kind: gvk.Kind, Group: gvk.Group, Version: gvk.Version, Resource: resource, Namespaced: namespaced}
}

// FlotillaGroup reports a group of Flotilla's own API: a Replicator never carries one of its
// kinds (a Replicator of Replicators would loop, and what Flotilla's objects mean is the primary's).
func FlotillaGroup(group string) bool {
	return group == GroupVersion.Group || strings.HasSuffix(group, "."+GroupVersion.Group)
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
