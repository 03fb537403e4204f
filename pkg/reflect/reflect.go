package reflect

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// AnnotationOwner says which part of Flotilla owns a copy: reflect, or replicator/<name>.
const AnnotationOwner = "flotilla.dev/owner"

// OwnerReflect is the AnnotationOwner value of dependency copies.
const OwnerReflect = "reflect"

// copyMeta is the metadata of a copy in a secondary.
func copyMeta(name, namespace, primaryID string, owner metav1.OwnerReference) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace,
		Labels:          map[string]string{flotillav1.LabelPrimary: primaryID},
		Annotations:     map[string]string{AnnotationOwner: OwnerReflect},
		OwnerReferences: []metav1.OwnerReference{owner}}
}

// ConfigMapCopy is the secondary's copy of a ConfigMap.
func ConfigMapCopy(src *corev1.ConfigMap, primaryID string, owner metav1.OwnerReference) *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: copyMeta(src.Name, src.Namespace, primaryID, owner),
		Data:       src.Data, BinaryData: src.BinaryData, Immutable: src.Immutable}
}

// SecretCopy is the secondary's copy of a Secret.
func SecretCopy(src *corev1.Secret, primaryID string, owner metav1.OwnerReference) *corev1.Secret {
	return &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: copyMeta(src.Name, src.Namespace, primaryID, owner),
		Data:       src.Data, Type: src.Type, Immutable: src.Immutable}
}

// Reflector copies dependencies from the primary (read with Primary) to a secondary.
type Reflector struct {
	// Primary reads ConfigMaps, Secrets and ServiceAccounts in the primary (uncached gets).
	Primary   client.Reader
	PrimaryID string
}

// Missing is a required dependency that does not exist in the primary: the delegate waits for it.
type Missing struct{ Kind, Name string }

func (m *Missing) Error() string { return fmt.Sprintf("%s %s does not exist", m.Kind, m.Name) }

// Ensure copies the dependencies of pod into the secondary reached by sec, before its delegate is
// created. It returns a *Missing for a required reference that does not exist in the primary.
func (r *Reflector) Ensure(ctx context.Context, sec client.Client, pod *corev1.Pod, owner metav1.OwnerReference) error {
	cms, secrets := Dependencies(pod)
	for _, ref := range cms {
		var src corev1.ConfigMap
		if err := r.Primary.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, &src); err != nil {
			if apierrors.IsNotFound(err) {
				if ref.Optional {
					continue
				}
				return &Missing{Kind: "ConfigMap", Name: ref.Name}
			}
			return fmt.Errorf("reading ConfigMap %s/%s: %w", pod.Namespace, ref.Name, err)
		}
		if ReplicatorOwned(ctx, sec, client.ObjectKeyFromObject(&src)) {
			continue // a Replicator applies it there: that satisfies the dependency
		}
		if err := apply(ctx, sec, ConfigMapCopy(&src, r.PrimaryID, owner)); err != nil {
			return err
		}
	}
	for _, ref := range secrets {
		var src corev1.Secret
		if err := r.Primary.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, &src); err != nil {
			if apierrors.IsNotFound(err) {
				if ref.Optional {
					continue
				}
				return &Missing{Kind: "Secret", Name: ref.Name}
			}
			return fmt.Errorf("reading Secret %s/%s: %w", pod.Namespace, ref.Name, err)
		}
		if src.Type == corev1.SecretTypeServiceAccountToken {
			continue // the secondary has its own
		}
		if err := apply(ctx, sec, SecretCopy(&src, r.PrimaryID, owner)); err != nil {
			return err
		}
	}
	return r.ensureServiceAccount(ctx, sec, pod, owner)
}

// ensureServiceAccount creates a same-named ServiceAccount when the delegate runs as one; the
// default one is the secondary's own.
func (r *Reflector) ensureServiceAccount(ctx context.Context, sec client.Client, pod *corev1.Pod, owner metav1.OwnerReference) error {
	name := pod.Spec.ServiceAccountName
	if name == "" || name == "default" {
		return nil
	}
	sa := &corev1.ServiceAccount{ObjectMeta: copyMeta(name, pod.Namespace, r.PrimaryID, owner)}
	if err := sec.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ServiceAccount %s/%s: %w", pod.Namespace, name, err)
	}
	return nil
}

// ReplicatorOwned says whether a ConfigMap in a secondary is a Replicator's (one owner per copy:
// reflection neither overwrites nor deletes it).
func ReplicatorOwned(ctx context.Context, sec client.Reader, key client.ObjectKey) bool {
	var cm corev1.ConfigMap
	if err := sec.Get(ctx, key, &cm); err != nil {
		return false
	}
	return strings.HasPrefix(cm.Annotations[AnnotationOwner], "replicator/")
}

// apply writes a copy with server-side apply (no read first: Secrets may not be read there).
// An immutable copy whose content changed is replaced.
func apply(ctx context.Context, c client.Client, obj client.Object) error {
	err := c.Patch(ctx, obj, client.Apply, client.FieldOwner("flotilla"), client.ForceOwnership) //nolint:staticcheck // typed apply of a core object
	if err != nil && apierrors.IsInvalid(err) {
		// An immutable ConfigMap or Secret cannot change: replace it.
		if derr := c.Delete(ctx, obj); derr != nil && !apierrors.IsNotFound(derr) {
			return fmt.Errorf("replacing immutable %s/%s: %w", obj.GetNamespace(), obj.GetName(), derr)
		}
		err = c.Patch(ctx, obj, client.Apply, client.FieldOwner("flotilla"), client.ForceOwnership) //nolint:staticcheck // as above
	}
	if err != nil {
		return fmt.Errorf("copying %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// AnnotationKeepServiceType keeps a copied Service's type (NodePort, LoadBalancer) instead of ClusterIP.
const AnnotationKeepServiceType = "flotilla.dev/keep-service-type"

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
	_, keep := src.Annotations[AnnotationKeepServiceType]
	if !keep && spec.Type != corev1.ServiceTypeExternalName {
		spec.Type = corev1.ServiceTypeClusterIP
		spec.ExternalTrafficPolicy, spec.AllocateLoadBalancerNodePorts, spec.LoadBalancerClass = "", nil, nil
		spec.LoadBalancerSourceRanges = nil
	}
	return &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: copyMeta(src.Name, src.Namespace, primaryID, owner), Spec: spec}
}

// NetworkPolicyCopy is the secondary's copy of a NetworkPolicy that selects elected pods. Its pod
// selectors match the delegates, which carry their proxies' labels; namespace selectors are the
// secondary's namespaces' labels.
func NetworkPolicyCopy(src *networkingv1.NetworkPolicy, primaryID string, owner metav1.OwnerReference) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: copyMeta(src.Name, src.Namespace, primaryID, owner), Spec: *src.Spec.DeepCopy()}
}
