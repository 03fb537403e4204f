package translate

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Object is a typed Kubernetes object: the methods of controller-runtime's client.Object, named
// here so that translate needs no client. Every client.Object is one, and the other way round.
type Object interface {
	metav1.Object
	runtime.Object
}

// ObjectList is a typed list of objects (controller-runtime's client.ObjectList).
type ObjectList interface {
	metav1.ListInterface
	runtime.Object
}

// Read says how the manager reads the primary's objects of a dependency kind.
type Read int

const (
	// ReadMetadata watches every object of the kind in the primary through a metadata-only
	// informer, which says when one changed (its resourceVersion); the content is read by name,
	// uncached, only to copy it. The manager never holds the content of every ConfigMap and
	// Secret of the primary.
	ReadMetadata Read = iota + 1
	// ReadCache reads from the manager's cache (a full informer): the objects' specs are matched
	// against the proxies' labels.
	ReadCache
	// ReadNothing reads nothing of the primary's: the copy is made from the pod's reference alone
	// (a ServiceAccount: its name), once, before the delegate, and is not kept in sync.
	ReadNothing
)

// Use says how a proxy uses an object of a dependency kind.
type Use int

const (
	// UseReference is an object the pod's spec names (References).
	UseReference Use = iota + 1
	// UseSelector is an object that selects the pod by its labels (Selects).
	UseSelector
	// UseBackends is an object that sends to Services of the primary that select the pod
	// (Backends).
	UseBackends
)

// DependencyKind is a kind of the primary's objects that follow elected pods to the secondaries
// running them: how the manager reads them, how a proxy uses one, and how its copy is made.
// DependencyKinds is the one list of them: the dependency sync's watches and lookups, the copies
// made before a delegate (pkg/copies) and a primary's rights in a secondary (pkg/access) are
// derived from it, and the chart's RBAC is checked against it.
type DependencyKind struct {
	Kind string
	// Resource is its API: what the metadata informer lists, what the manager must be granted to
	// read in the primary (Read) and to write in every secondary.
	Resource schema.GroupVersionResource
	Read     Read
	Use      Use
	// References lists the objects of the kind a pod's spec names (UseReference).
	References func(pod *corev1.Pod) []Ref
	// Selects says whether obj selects the pod (UseSelector).
	Selects func(obj Object, pod *corev1.Pod) bool
	// Backends names the Services obj sends to (UseBackends).
	Backends func(obj Object) []string
	// New is an empty object of the kind.
	New func() Object
	// NewList is an empty list of them (ReadCache: listed when a proxy changes).
	NewList func() ObjectList
	// Copy is the secondary's copy of the primary's object (nil for an object of another type).
	Copy func(src Object, primaryID string, owner metav1.OwnerReference) Object
	// NotCopied says why the primary's object is never copied, "" when it is (nil: always
	// copied). A pod that requires it waits; an optional reference to it is dropped.
	NotCopied func(src Object) string
	// WriteOnly says the copy is never read in a secondary (a Secret: Flotilla's identity there
	// has no get, list or watch on them): it is written blind and deleted only as last written.
	WriteOnly bool
}

// Synced says whether the dependency sync keeps copies of the kind true to the primary and removes
// those no delegate uses any more: every kind whose primary objects are read.
func (k DependencyKind) Synced() bool { return k.Read != ReadNothing }

// DependencyKinds are the kinds that follow elected pods, in the order a proxy's copies are listed.
var DependencyKinds = []DependencyKind{
	{Kind: KindConfigMap, Resource: corev1.SchemeGroupVersion.WithResource("configmaps"), Read: ReadMetadata, Use: UseReference,
		References: func(pod *corev1.Pod) []Ref { cms, _ := Dependencies(pod); return cms },
		New:        func() Object { return &corev1.ConfigMap{} },
		Copy:       copyOf(ConfigMapCopy)},
	{Kind: KindSecret, Resource: corev1.SchemeGroupVersion.WithResource("secrets"), Read: ReadMetadata, Use: UseReference,
		References: func(pod *corev1.Pod) []Ref { _, secrets := Dependencies(pod); return secrets },
		New:        func() Object { return &corev1.Secret{} },
		Copy:       copyOf(SecretCopy), NotCopied: serviceAccountToken, WriteOnly: true},
	{Kind: KindServiceAccount, Resource: corev1.SchemeGroupVersion.WithResource("serviceaccounts"), Read: ReadNothing, Use: UseReference,
		References: runsAs,
		New:        func() Object { return &corev1.ServiceAccount{} },
		Copy:       copyOf(ServiceAccountCopy)},
	{Kind: KindService, Resource: corev1.SchemeGroupVersion.WithResource("services"), Read: ReadCache, Use: UseSelector,
		Selects: selects(serviceSelects),
		New:     func() Object { return &corev1.Service{} }, NewList: func() ObjectList { return &corev1.ServiceList{} },
		Copy: copyOf(ServiceCopy)},
	{Kind: KindIngress, Resource: networkingv1.SchemeGroupVersion.WithResource("ingresses"), Read: ReadCache, Use: UseBackends,
		Backends: backends(IngressServices),
		New:      func() Object { return &networkingv1.Ingress{} }, NewList: func() ObjectList { return &networkingv1.IngressList{} },
		Copy: copyOf(IngressCopy)},
	{Kind: KindNetworkPolicy, Resource: networkingv1.SchemeGroupVersion.WithResource("networkpolicies"), Read: ReadCache, Use: UseSelector,
		Selects: selects(networkPolicySelects),
		New:     func() Object { return &networkingv1.NetworkPolicy{} }, NewList: func() ObjectList { return &networkingv1.NetworkPolicyList{} },
		Copy: copyOf(NetworkPolicyCopy)},
	{Kind: KindResourceClaimTemplate, Resource: resourcev1.SchemeGroupVersion.WithResource("resourceclaimtemplates"), Read: ReadMetadata, Use: UseReference,
		References: claimTemplatesOf,
		New:        func() Object { return &resourcev1.ResourceClaimTemplate{} },
		Copy:       copyOf(ResourceClaimTemplateCopy)},
	{Kind: KindResourceClaim, Resource: resourcev1.SchemeGroupVersion.WithResource("resourceclaims"), Read: ReadMetadata, Use: UseReference,
		References: namedClaimsOf,
		New:        func() Object { return &resourcev1.ResourceClaim{} },
		Copy:       copyOf(ResourceClaimCopy)},
}

// DependencyKindOf finds a kind of DependencyKinds by its name.
func DependencyKindOf(kind string) (DependencyKind, bool) {
	for _, k := range DependencyKinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return DependencyKind{}, false
}

// copyOf makes a typed copy builder one of the table's.
func copyOf[T, C Object](build func(T, string, metav1.OwnerReference) C) func(Object, string, metav1.OwnerReference) Object {
	return func(src Object, primaryID string, owner metav1.OwnerReference) Object {
		t, ok := src.(T)
		if !ok {
			return nil
		}
		return build(t, primaryID, owner)
	}
}

// selects makes a typed selector match one of the table's.
func selects[T Object](match func(T, *corev1.Pod) bool) func(Object, *corev1.Pod) bool {
	return func(obj Object, pod *corev1.Pod) bool {
		t, ok := obj.(T)
		return ok && match(t, pod)
	}
}

// backends makes a typed list of backend Services one of the table's.
func backends[T Object](services func(T) []string) func(Object) []string {
	return func(obj Object) []string {
		if t, ok := obj.(T); ok {
			return services(t)
		}
		return nil
	}
}

// serviceSelects: a Service without a selector selects nothing (its endpoints are someone else's).
func serviceSelects(svc *corev1.Service, pod *corev1.Pod) bool {
	return len(svc.Spec.Selector) > 0 && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels))
}

// networkPolicySelects: an empty pod selector selects every pod of the namespace.
func networkPolicySelects(np *networkingv1.NetworkPolicy, pod *corev1.Pod) bool {
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	return err == nil && sel.Matches(labels.Set(pod.Labels))
}

// runsAs is the ServiceAccount a pod runs as, when it is not the namespace's default one (every
// namespace of a secondary has its own).
func runsAs(pod *corev1.Pod) []Ref {
	name := pod.Spec.ServiceAccountName
	if name == "" || name == "default" {
		return nil
	}
	return []Ref{{Name: name}}
}

// serviceAccountToken: a token of the primary is never copied; the secondary's Secret of that name
// is not the tenant's to read.
func serviceAccountToken(src Object) string {
	if s, ok := src.(*corev1.Secret); ok && s.Type == corev1.SecretTypeServiceAccountToken {
		return "a ServiceAccount token of the primary, which Flotilla never copies to a secondary"
	}
	return ""
}
