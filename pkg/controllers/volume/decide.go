package volume

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// annotationSelectedNode is where the primary's scheduler puts the node it chose for a claim that
// waits for its first consumer.
const annotationSelectedNode = "volume.kubernetes.io/selected-node"

// IsRemote says whether a claim is of class flotilla.
func IsRemote(pvc *corev1.PersistentVolumeClaim) bool {
	return ptr.Deref(pvc.Spec.StorageClassName, "") == flotillav1.StorageClassRemote
}

// clusterOf decides the cluster of a claim: the one it names, else the virtual node the primary's
// scheduler selected for it, else that of a proxy using it ("" while none is known).
func clusterOf(pvc *corev1.PersistentVolumeClaim, proxies []corev1.Pod) string {
	if c := pvc.Annotations[flotillav1.AnnotationVolumeCluster]; c != "" {
		return c
	}
	if c, ok := flotillav1.ClusterOfNode(pvc.Annotations[annotationSelectedNode]); ok {
		return c
	}
	for i := range proxies {
		p := &proxies[i]
		if !p.DeletionTimestamp.IsZero() || !uses(p, pvc.Name) {
			continue
		}
		if c, ok := flotillav1.ClusterOfNode(p.Spec.NodeName); ok {
			return c
		}
	}
	return ""
}

func uses(p *corev1.Pod, claim string) bool {
	return slices.Contains(translate.VolumeClaims(p), claim)
}

// realClaim is the claim made in the secondary for a primary claim: same namespace and name,
// size, access modes and volume mode; the class its registration gives it (class; "": the
// secondary's default, filled by its admission); this primary's label and the primary claim's
// UID; no owner.
func realClaim(pvc *corev1.PersistentVolumeClaim, primaryID, class string) *corev1.PersistentVolumeClaim {
	real := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: pvc.Namespace, Name: pvc.Name,
			Labels:      map[string]string{flotillav1.LabelPrimary: primaryID},
			Annotations: map[string]string{flotillav1.AnnotationClaimUID: string(pvc.UID)}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: pvc.Spec.AccessModes,
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]}},
			VolumeMode:  pvc.Spec.VolumeMode,
		},
	}
	if class != "" {
		real.Spec.StorageClassName = ptr.To(class)
	}
	return real
}

// realClaimOf says whether a claim of a secondary is the real claim of this primary claim.
func realClaimOf(real, pvc *corev1.PersistentVolumeClaim, primaryID string) bool {
	return real.Labels[flotillav1.LabelPrimary] == primaryID && real.Annotations[flotillav1.AnnotationClaimUID] == string(pvc.UID)
}

// standInName is the name of the primary's volume that stands for a claim's real one.
func standInName(pvc *corev1.PersistentVolumeClaim) string { return "flotilla-" + string(pvc.UID) }

// standIn is the primary's volume for a claim whose data is in cluster: pre-bound to the claim,
// sized as the real volume once that is bound (as asked before), kept when released (Flotilla
// deletes it with the claim).
func standIn(pvc *corev1.PersistentVolumeClaim, real *corev1.PersistentVolumeClaim, cluster string) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: standInName(pvc),
			Labels: map[string]string{flotillav1.LabelCluster: cluster},
			Annotations: map[string]string{flotillav1.AnnotationVolumeCluster: cluster,
				"pv.kubernetes.io/provisioned-by": flotillav1.ProvisionerRemote}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: capacity(pvc, real)},
			AccessModes:                   pvc.Spec.AccessModes,
			VolumeMode:                    pvc.Spec.VolumeMode,
			StorageClassName:              flotillav1.StorageClassRemote,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
			// Nothing in the primary mounts it: the path only says where the data is.
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{
				Path: "/" + strings.Join([]string{"flotilla", cluster, pvc.Namespace, pvc.Name}, "/")}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: flotillav1.LabelCluster, Operator: corev1.NodeSelectorOpIn, Values: []string{cluster}}}}}}},
		},
	}
	if real != nil && real.Spec.VolumeName != "" {
		pv.Annotations[flotillav1.AnnotationRealVolume] = real.Spec.VolumeName
	}
	return pv
}

// capacity is the real volume's size once it is bound, else the size asked for.
func capacity(pvc, real *corev1.PersistentVolumeClaim) resource.Quantity {
	if real != nil && real.Status.Phase == corev1.ClaimBound {
		if q, ok := real.Status.Capacity[corev1.ResourceStorage]; ok {
			return q
		}
	}
	return pvc.Spec.Resources.Requests[corev1.ResourceStorage]
}

// expansion is the size the real claim must be asked for when the primary claim asks for more
// than it does (nil: nothing to do). A claim is never shrunk.
func expansion(pvc, real *corev1.PersistentVolumeClaim) *resource.Quantity {
	want, have := pvc.Spec.Resources.Requests[corev1.ResourceStorage], real.Spec.Resources.Requests[corev1.ResourceStorage]
	if want.Cmp(have) > 0 {
		return &want
	}
	return nil
}
