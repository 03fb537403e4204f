package volume

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func claim(edit func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data-web-0", UID: "u1", Annotations: map[string]string{}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(flotillav1.StorageClassRemote),
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if edit != nil {
		edit(pvc)
	}
	return pvc
}

func proxyOn(node, claimName string, deleting bool) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}, Spec: corev1.PodSpec{NodeName: node,
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName}}}}}}
	if deleting {
		now := metav1.Now()
		p.DeletionTimestamp = &now
	}
	return p
}

func TestClusterOf(t *testing.T) {
	tests := map[string]struct {
		pvc     *corev1.PersistentVolumeClaim
		proxies []corev1.Pod
		want    string
	}{
		"decided once: the cluster it names wins over a proxy elsewhere": {
			claim(func(p *corev1.PersistentVolumeClaim) { p.Annotations[flotillav1.AnnotationVolumeCluster] = "eu" }),
			[]corev1.Pod{proxyOn("flotilla-us", "data-web-0", false)}, "eu"},
		"the virtual node the primary's scheduler selected": {
			claim(func(p *corev1.PersistentVolumeClaim) { p.Annotations[annotationSelectedNode] = "flotilla-us" }), nil, "us"},
		"a node of the primary selected: not a cluster": {
			claim(func(p *corev1.PersistentVolumeClaim) { p.Annotations[annotationSelectedNode] = "worker-1" }), nil, ""},
		"a proxy bound to a virtual node uses it": {claim(nil), []corev1.Pod{proxyOn("flotilla-eu", "data-web-0", false)}, "eu"},
		"a proxy using another claim":             {claim(nil), []corev1.Pod{proxyOn("flotilla-eu", "other", false)}, ""},
		"a proxy not bound yet":                   {claim(nil), []corev1.Pod{proxyOn("", "data-web-0", false)}, ""},
		"a terminating proxy decides nothing":     {claim(nil), []corev1.Pod{proxyOn("flotilla-eu", "data-web-0", true)}, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := clusterOf(tc.pvc, tc.proxies); got != tc.want {
				t.Errorf("clusterOf = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRealClaimAndStandIn(t *testing.T) {
	pvc := claim(nil)
	if c := realClaim(pvc, "p1", "fast-ssd").Spec.StorageClassName; c == nil || *c != "fast-ssd" {
		t.Errorf("real claim's class = %v, want the registration's fast-ssd", c)
	}
	real := realClaim(pvc, "p1", "")
	if real.Spec.StorageClassName != nil {
		t.Errorf("real claim's class = %q, want none (the secondary's default)", *real.Spec.StorageClassName)
	}
	if len(real.OwnerReferences) != 0 {
		t.Errorf("real claim owned by %v: deleting an owner must never take data", real.OwnerReferences)
	}
	if !realClaimOf(real, pvc, "p1") || realClaimOf(real, pvc, "p2") || realClaimOf(real, claim(func(p *corev1.PersistentVolumeClaim) { p.UID = "u2" }), "p1") {
		t.Error("realClaimOf must match this primary and this claim's UID only")
	}
	if got := real.Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "1Gi" {
		t.Errorf("real claim asks %s, want 1Gi", got.String())
	}

	pv := standIn(pvc, real, "eu")
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.String() != "1Gi" {
		t.Errorf("unbound: stand-in of %s, want the 1Gi asked for", got.String())
	}
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Errorf("stand-in must be pre-bound to the claim and retained: %+v", pv.Spec)
	}
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	if len(terms) != 1 || terms[0].MatchExpressions[0].Key != flotillav1.LabelCluster || terms[0].MatchExpressions[0].Values[0] != "eu" {
		t.Errorf("stand-in node affinity = %+v, want flotilla.dev/cluster In [eu]", terms)
	}
	real.Spec.VolumeName = "pvc-123"
	real.Status.Phase = corev1.ClaimBound
	real.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
	pv = standIn(pvc, real, "eu")
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.String() != "2Gi" || pv.Annotations[flotillav1.AnnotationRealVolume] != "pvc-123" {
		t.Errorf("bound: stand-in of %s for %q, want 2Gi for pvc-123", got.String(), pv.Annotations[flotillav1.AnnotationRealVolume])
	}
}

func TestExpansion(t *testing.T) {
	size := func(q string) *corev1.PersistentVolumeClaim {
		return claim(func(p *corev1.PersistentVolumeClaim) {
			p.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(q)
		})
	}
	if got := expansion(size("2Gi"), size("1Gi")); got == nil || got.String() != "2Gi" {
		t.Errorf("1Gi to 2Gi: %v, want 2Gi", got)
	}
	if got := expansion(size("1Gi"), size("2Gi")); got != nil {
		t.Errorf("never shrunk: %v", got)
	}
	if got := expansion(size("1Gi"), size("1Gi")); got != nil {
		t.Errorf("same size: %v", got)
	}
}
