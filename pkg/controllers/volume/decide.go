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

// moveTo decides whether a claim starts afresh in another cluster, and for which pod: its cluster
// is lost (lost: its virtual node carries the failover taint) and a live proxy that uses it, made
// by the webhook (sealed), chose flotilla.dev/on-volume-cluster-loss: recreate and was placed on
// another cluster's virtual node (which the webhook does only once the cluster was unreachable for
// the pod's failover bound). "" and nil: the claim stays.
func moveTo(pvc *corev1.PersistentVolumeClaim, proxies []corev1.Pod, lost bool, sealed func(*corev1.Pod) bool) (string, *corev1.Pod) {
	from := pvc.Annotations[flotillav1.AnnotationVolumeCluster]
	if from == "" || !lost {
		return "", nil
	}
	for i := range proxies {
		p := &proxies[i]
		if !p.DeletionTimestamp.IsZero() || p.Labels[flotillav1.LabelProxy] != "true" || !uses(p, pvc.Name) ||
			!translate.RecreatesOnVolumeClusterLoss(p) || !sealed(p) {
			continue
		}
		if to, ok := flotillav1.ClusterOfNode(p.Spec.NodeName); ok && to != from {
			return to, p
		}
	}
	return "", nil
}

// retainedIn is the clusters that keep an earlier real claim of a claim.
func retainedIn(pvc *corev1.PersistentVolumeClaim) []string {
	var out []string
	for c := range strings.SplitSeq(pvc.Annotations[flotillav1.AnnotationVolumeRetainedIn], ",") {
		if c = strings.TrimSpace(c); c != "" && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// withRetained is retainedIn with cluster added (once), and without to (a claim that comes back to
// a cluster uses what it kept there).
func withRetained(pvc *corev1.PersistentVolumeClaim, cluster, to string) string {
	out := retainedIn(pvc)
	if !slices.Contains(out, cluster) {
		out = append(out, cluster)
	}
	out = slices.DeleteFunc(out, func(c string) bool { return c == to })
	return strings.Join(out, ",")
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

// standInName is the name of the primary's volume that stands for a claim's real one.
func standInName(pvc *corev1.PersistentVolumeClaim) string { return "flotilla-" + string(pvc.UID) }

// standIn is the primary's volume for a claim whose data is in cluster: pre-bound to the claim,
// sized as the real volume once that is bound (as asked before), kept when released (Flotilla
// deletes it with the claim). Its node affinity admits every virtual node (flotilla.dev/cluster
// exists) and its path names no cluster: both are immutable, and a claim whose pod starts afresh
// elsewhere keeps its volume. The cluster is its label and annotation, which the webhook reads.
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
			// Nothing in the primary mounts it: the path only says whose it is.
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{
				Path: "/" + strings.Join([]string{"flotilla", pvc.Namespace, pvc.Name}, "/")}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: flotillav1.LabelCluster, Operator: corev1.NodeSelectorOpExists}}}}}},
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

// expansion is the size the real claim must be asked for when the primary claim asks for another
// (nil: nothing to do). More is asked as it is. Less is asked only to recover from an expansion the
// secondary could not make: above the real volume's size, which Kubernetes then lets a claim's
// request come down to; a volume is never shrunk.
func expansion(pvc, real *corev1.PersistentVolumeClaim) *resource.Quantity {
	want, have := pvc.Spec.Resources.Requests[corev1.ResourceStorage], real.Spec.Resources.Requests[corev1.ResourceStorage]
	switch want.Cmp(have) {
	case 1:
		return &want
	case -1:
		if size, ok := real.Status.Capacity[corev1.ResourceStorage]; ok && real.Status.Phase == corev1.ClaimBound && want.Cmp(size) > 0 {
			return &want
		}
	}
	return nil
}

// resizing says whether a bound real claim is being expanded: it asks for more than its volume
// has, or its resizer left a condition (Resizing, ControllerResizeError...) on it.
func resizing(real *corev1.PersistentVolumeClaim) bool {
	want := real.Spec.Resources.Requests[corev1.ResourceStorage]
	size, ok := real.Status.Capacity[corev1.ResourceStorage]
	return !ok || want.Cmp(size) > 0 || len(real.Status.Conditions) > 0
}

// resizeConditions are the real claim's conditions as the primary claim shows them: the same
// types, statuses, reasons and times, each message saying which cluster it is from. A claim's
// conditions are its resizers' (Resizing, FileSystemResizePending, ControllerResizeError,
// NodeResizeError, ModifyingVolume...): nothing in the primary writes them.
func resizeConditions(real *corev1.PersistentVolumeClaim, cluster string) []corev1.PersistentVolumeClaimCondition {
	if len(real.Status.Conditions) == 0 {
		return nil
	}
	out := make([]corev1.PersistentVolumeClaimCondition, 0, len(real.Status.Conditions))
	for _, c := range real.Status.Conditions {
		if c.Message != "" {
			c.Message = translate.InCluster(cluster, c.Message)
		}
		out = append(out, c)
	}
	return out
}
