package translate

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kinds of the DRA objects a delegate's claims are made from in its secondary.
const (
	KindResourceClaimTemplate = "ResourceClaimTemplate"
	KindResourceClaim         = "ResourceClaim"
)

// TakeResourceClaims moves a pod's DRA claims (spec.resourceClaims, and each container's
// resources.claims) off its spec into c, in place. A proxy keeps none: the primary's scheduler
// would try to allocate them on a virtual node, which has no devices, and the primary's claim
// controller would make a claim of each template that nothing ever allocates. The delegate gets
// them back (Delegate), and its secondary allocates them.
func TakeResourceClaims(spec *corev1.PodSpec, c *Constraints) {
	c.ResourceClaims = append(c.ResourceClaims, spec.ResourceClaims...)
	spec.ResourceClaims = nil
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			if len(list[i].Resources.Claims) == 0 {
				continue
			}
			if c.ContainerClaims == nil {
				c.ContainerClaims = map[string][]corev1.ResourceClaim{}
			}
			c.ContainerClaims[list[i].Name] = list[i].Resources.Claims
			list[i].Resources.Claims = nil
		}
	}
}

// giveResourceClaims puts the claims TakeResourceClaims took back on a delegate's spec.
func giveResourceClaims(spec *corev1.PodSpec, c Constraints) {
	if len(c.ResourceClaims) == 0 {
		return
	}
	spec.ResourceClaims = append(spec.ResourceClaims, c.ResourceClaims...)
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			if claims, ok := c.ContainerClaims[list[i].Name]; ok {
				list[i].Resources.Claims = append([]corev1.ResourceClaim(nil), claims...)
			}
		}
	}
}

// ProxyResourceClaims are the DRA claims of a proxy: those the webhook took off it (in its
// delegate-constraints annotation), and any it still carries (a proxy the webhook did not make).
func ProxyResourceClaims(pod *corev1.Pod) []corev1.PodResourceClaim {
	out := slices.Clone(pod.Spec.ResourceClaims)
	if c, err := ConstraintsOf(pod); err == nil {
		out = append(out, c.ResourceClaims...)
	}
	return out
}

// claimTemplatesOf and namedClaimsOf are the templates and the claims a proxy's DRA claims name:
// the objects copied to its secondary before its delegate (a claim of each template is made
// there for the delegate by the secondary's own claim controller; a named claim is shared, as in
// the primary, by the pods of that cluster that name it).
func claimTemplatesOf(pod *corev1.Pod) []Ref {
	return claimRefs(pod, func(rc corev1.PodResourceClaim) *string { return rc.ResourceClaimTemplateName })
}

func namedClaimsOf(pod *corev1.Pod) []Ref {
	return claimRefs(pod, func(rc corev1.PodResourceClaim) *string { return rc.ResourceClaimName })
}

// claimRefs are the names one field of a proxy's DRA claims gives, each once, sorted.
func claimRefs(pod *corev1.Pod, field func(corev1.PodResourceClaim) *string) []Ref {
	var names []string
	for _, rc := range ProxyResourceClaims(pod) {
		if name := field(rc); name != nil && *name != "" {
			names = append(names, *name)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	out := make([]Ref, 0, len(names))
	for _, n := range names {
		out = append(out, Ref{Name: n})
	}
	return out
}

// ResourceClaimTemplateCopy is the secondary's copy of a ResourceClaimTemplate: its spec (the
// claim's metadata and devices), from which the secondary's claim controller makes each
// delegate's own claim.
func ResourceClaimTemplateCopy(src *resourcev1.ResourceClaimTemplate, primaryID string, owner metav1.OwnerReference) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{TypeMeta: metav1.TypeMeta{APIVersion: resourcev1.SchemeGroupVersion.String(), Kind: KindResourceClaimTemplate},
		ObjectMeta: CopyMeta(src.Name, src.Namespace, primaryID, owner), Spec: *src.Spec.DeepCopy()}
}

// ResourceClaimCopy is the secondary's copy of a claim pods name: its spec only (the secondary's
// scheduler allocates it there, and reserves it for the delegates that use it).
func ResourceClaimCopy(src *resourcev1.ResourceClaim, primaryID string, owner metav1.OwnerReference) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{TypeMeta: metav1.TypeMeta{APIVersion: resourcev1.SchemeGroupVersion.String(), Kind: KindResourceClaim},
		ObjectMeta: CopyMeta(src.Name, src.Namespace, primaryID, owner), Spec: *src.Spec.DeepCopy()}
}
