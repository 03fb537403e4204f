package translate

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// CopyMeta is the metadata of a copy in a secondary.
func CopyMeta(name, namespace, primaryID string, owner metav1.OwnerReference) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace,
		Labels:          map[string]string{flotillav1.LabelPrimary: primaryID},
		Annotations:     map[string]string{flotillav1.AnnotationOwner: flotillav1.OwnerReflect},
		OwnerReferences: []metav1.OwnerReference{owner}}
}

// ConfigMapCopy is the secondary's copy of a ConfigMap.
func ConfigMapCopy(src *corev1.ConfigMap, primaryID string, owner metav1.OwnerReference) *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: CopyMeta(src.Name, src.Namespace, primaryID, owner),
		Data:       src.Data, BinaryData: src.BinaryData, Immutable: src.Immutable}
}

// SecretCopy is the secondary's copy of a Secret.
func SecretCopy(src *corev1.Secret, primaryID string, owner metav1.OwnerReference) *corev1.Secret {
	return &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: CopyMeta(src.Name, src.Namespace, primaryID, owner),
		Data:       src.Data, Type: src.Type, Immutable: src.Immutable}
}

// ServiceAccountCopy is the secondary's ServiceAccount of the name a delegate runs as: nothing of
// the primary's (its tokens and RBAC are each cluster's own), only Flotilla's metadata.
func ServiceAccountCopy(src *corev1.ServiceAccount, primaryID string, owner metav1.OwnerReference) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: CopyMeta(src.Name, src.Namespace, primaryID, owner)}
}

// ServiceCopy is the secondary's copy of a Service that selects elected pods. What belongs to the
// primary's network is cleared so that the secondary allocates its own: cluster IPs (headless kept),
// node ports, health-check node port, load-balancer IP, external IPs, IP families; the type becomes
// ClusterIP unless the Service is annotated flotilla.dev/keep-service-type.
func ServiceCopy(src *corev1.Service, primaryID string, owner metav1.OwnerReference) *corev1.Service {
	spec := *src.Spec.DeepCopy()
	if spec.ClusterIP != corev1.ClusterIPNone {
		spec.ClusterIP = ""
	}
	spec.ClusterIPs, spec.IPFamilies, spec.IPFamilyPolicy = nil, nil, nil
	spec.HealthCheckNodePort, spec.LoadBalancerIP, spec.ExternalIPs = 0, "", nil //nolint:staticcheck // cleared, not used
	for i := range spec.Ports {
		spec.Ports[i].NodePort = 0
	}
	_, keep := src.Annotations[flotillav1.AnnotationKeepServiceType]
	if !keep && spec.Type != corev1.ServiceTypeExternalName {
		spec.Type = corev1.ServiceTypeClusterIP
		spec.ExternalTrafficPolicy, spec.AllocateLoadBalancerNodePorts, spec.LoadBalancerClass = "", nil, nil
		spec.LoadBalancerSourceRanges = nil
	}
	return &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: CopyMeta(src.Name, src.Namespace, primaryID, owner), Spec: spec}
}

// IngressCopy is the secondary's copy of an Ingress whose backends are Services of elected pods:
// its spec and annotations (an ingress controller's settings), never its status (the addresses
// are each cluster's own load balancer's).
func IngressCopy(src *networkingv1.Ingress, primaryID string, owner metav1.OwnerReference) *networkingv1.Ingress {
	meta := CopyMeta(src.Name, src.Namespace, primaryID, owner)
	for k, v := range DropSnippets(src.Annotations) {
		if _, ours := meta.Annotations[k]; !ours && !strings.HasPrefix(k, "kubectl.kubernetes.io/") {
			meta.Annotations[k] = v
		}
	}
	return &networkingv1.Ingress{TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: meta, Spec: *src.Spec.DeepCopy()}
}

// IngressServices are the Services an Ingress sends to (its default backend and every path's).
func IngressServices(ing *networkingv1.Ingress) []string {
	seen := map[string]bool{}
	var out []string
	add := func(b *networkingv1.IngressBackend) {
		if b != nil && b.Service != nil && !seen[b.Service.Name] {
			seen[b.Service.Name] = true
			out = append(out, b.Service.Name)
		}
	}
	add(ing.Spec.DefaultBackend)
	for _, rule := range ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		for i := range rule.HTTP.Paths {
			add(&rule.HTTP.Paths[i].Backend)
		}
	}
	return out
}

// NetworkPolicyCopy is the secondary's copy of a NetworkPolicy that selects elected pods. Its pod
// selectors match the delegates, which carry their proxies' labels; namespace selectors are the
// secondary's namespaces' labels.
func NetworkPolicyCopy(src *networkingv1.NetworkPolicy, primaryID string, owner metav1.OwnerReference) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: CopyMeta(src.Name, src.Namespace, primaryID, owner), Spec: *src.Spec.DeepCopy()}
}

// Snippet says whether an annotation key is an ingress controller's snippet (ingress-nginx's
// configuration-snippet, server-snippet, auth-snippet, stream-snippet...): raw configuration the
// controller runs as it is.
func Snippet(key string) bool {
	return strings.HasSuffix(key, "-snippet") || strings.HasSuffix(key, "-snippets") || strings.HasSuffix(key, "/snippet")
}

// DropSnippets is annotations without snippet keys (a new map; nil for none left). An Ingress copied
// or replicated to a secondary never carries one: the primary's admission rules about who may set
// them do not run there, and a secondary's fence refuses them.
func DropSnippets(annotations map[string]string) map[string]string {
	var out map[string]string
	for k, v := range annotations {
		if Snippet(k) {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}
