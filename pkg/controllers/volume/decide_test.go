package volume

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
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
	if !translate.RealClaimOf(real, pvc, "p1") || translate.RealClaimOf(real, pvc, "p2") || translate.RealClaimOf(real, claim(func(p *corev1.PersistentVolumeClaim) { p.UID = "u2" }), "p1") {
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
	if len(terms) != 1 || terms[0].MatchExpressions[0].Key != flotillav1.LabelCluster || terms[0].MatchExpressions[0].Operator != corev1.NodeSelectorOpExists {
		t.Errorf("stand-in node affinity = %+v, want flotilla.dev/cluster Exists (immutable, so it names no cluster)", terms)
	}
	if pv.Labels[flotillav1.LabelCluster] != "eu" || pv.Annotations[flotillav1.AnnotationVolumeCluster] != "eu" || strings.Contains(pv.Spec.Local.Path, "eu") {
		t.Errorf("stand-in names its cluster in its label and annotation only: %+v, path %s", pv.ObjectMeta, pv.Spec.Local.Path)
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

func TestMoveTo(t *testing.T) {
	pvc := claim(func(p *corev1.PersistentVolumeClaim) {
		p.Annotations = map[string]string{flotillav1.AnnotationVolumeCluster: "eu"}
	})
	proxy := func(node string, opts ...func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: pvc.Namespace,
			Labels:      map[string]string{flotillav1.LabelProxy: "true"},
			Annotations: map[string]string{flotillav1.AnnotationOnVolumeClusterLoss: flotillav1.OnVolumeClusterLossRecreate}},
			Spec: corev1.PodSpec{NodeName: node, Volumes: []corev1.Volume{{Name: "data",
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}}}}
		for _, o := range opts {
			o(&p)
		}
		return p
	}
	usNode, euNode := flotillav1.VirtualNodeName("us"), flotillav1.VirtualNodeName("eu")
	sealed := func(p *corev1.Pod) bool { return p.Annotations["sealed"] != "no" }
	noRecreate := func(p *corev1.Pod) { delete(p.Annotations, flotillav1.AnnotationOnVolumeClusterLoss) }
	unsealed := func(p *corev1.Pod) { p.Annotations["sealed"] = "no" }
	notProxy := func(p *corev1.Pod) { delete(p.Labels, flotillav1.LabelProxy) }
	deleting := func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }
	otherClaim := func(p *corev1.Pod) { p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = "other" }
	tests := map[string]struct {
		proxies []corev1.Pod
		lost    bool
		want    string
	}{
		"lost, a recreating proxy elsewhere: moves there": {[]corev1.Pod{proxy(usNode)}, true, "us"},
		"not lost: stays":                   {[]corev1.Pod{proxy(usNode)}, false, ""},
		"lost, proxy on the same cluster":   {[]corev1.Pod{proxy(euNode)}, true, ""},
		"lost, proxy not bound yet":         {[]corev1.Pod{proxy("")}, true, ""},
		"lost, the proxy did not choose it": {[]corev1.Pod{proxy(usNode, noRecreate)}, true, ""},
		"lost, the proxy is not sealed":     {[]corev1.Pod{proxy(usNode, unsealed)}, true, ""},
		"lost, a pod that is no proxy":      {[]corev1.Pod{proxy(usNode, notProxy)}, true, ""},
		"lost, the proxy is going":          {[]corev1.Pod{proxy(usNode, deleting)}, true, ""},
		"lost, it uses another claim":       {[]corev1.Pod{proxy(usNode, otherClaim)}, true, ""},
	}
	for name, tc := range tests {
		if got, p := moveTo(pvc, tc.proxies, tc.lost, sealed); got != tc.want || (got != "") != (p != nil) {
			t.Errorf("%s: moveTo = %q, %v; want %q", name, got, p, tc.want)
		}
	}
}

func TestWithRetained(t *testing.T) {
	pvc := claim(func(p *corev1.PersistentVolumeClaim) {
		p.Annotations = map[string]string{flotillav1.AnnotationVolumeRetainedIn: "asia, eu"}
	})
	if got := withRetained(pvc, "us", "ap"); got != "asia,eu,us" {
		t.Errorf("adding us: %q", got)
	}
	if got := withRetained(pvc, "eu", "ap"); got != "asia,eu" {
		t.Errorf("eu once: %q", got)
	}
	if got := withRetained(pvc, "us", "asia"); got != "eu,us" {
		t.Errorf("back to asia, which is no longer only kept: %q", got)
	}
}

func TestExpansionRecovers(t *testing.T) {
	real := func(request, capacity string, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
		return claim(func(p *corev1.PersistentVolumeClaim) {
			p.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(request)
			p.Status.Phase = phase
			if capacity != "" {
				p.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
			}
		})
	}
	asks := func(q string) *corev1.PersistentVolumeClaim {
		return claim(func(p *corev1.PersistentVolumeClaim) {
			p.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(q)
		})
	}
	for _, tc := range []struct {
		name      string
		pvc, real *corev1.PersistentVolumeClaim
		want      string // "" for nothing to do
	}{
		{"an expansion too large, asked down above the volume's size", asks("3Gi"), real("8Gi", "2Gi", corev1.ClaimBound), "3Gi"},
		{"down to the volume's size: not a request Kubernetes takes", asks("2Gi"), real("8Gi", "2Gi", corev1.ClaimBound), ""},
		{"below the volume's size: never shrunk", asks("1Gi"), real("8Gi", "2Gi", corev1.ClaimBound), ""},
		{"an unbound claim has no size to come down to", asks("1Gi"), real("2Gi", "", corev1.ClaimPending), ""},
		{"up", asks("4Gi"), real("2Gi", "2Gi", corev1.ClaimBound), "4Gi"},
	} {
		got := expansion(tc.pvc, tc.real)
		switch {
		case tc.want == "" && got != nil:
			t.Errorf("%s: asked for %s, want nothing", tc.name, got)
		case tc.want != "" && (got == nil || got.String() != tc.want):
			t.Errorf("%s: asked for %v, want %s", tc.name, got, tc.want)
		}
	}
}

func TestResizing(t *testing.T) {
	bound := func(request, capacity string, conds ...corev1.PersistentVolumeClaimConditionType) *corev1.PersistentVolumeClaim {
		return claim(func(p *corev1.PersistentVolumeClaim) {
			p.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(request)
			p.Status.Phase = corev1.ClaimBound
			p.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
			for _, c := range conds {
				p.Status.Conditions = append(p.Status.Conditions, corev1.PersistentVolumeClaimCondition{Type: c, Status: corev1.ConditionTrue})
			}
		})
	}
	for _, tc := range []struct {
		name string
		real *corev1.PersistentVolumeClaim
		want bool
	}{
		{"at its size", bound("1Gi", "1Gi"), false},
		{"asking for more", bound("2Gi", "1Gi"), true},
		{"grown, its resizer not done", bound("2Gi", "2Gi", corev1.PersistentVolumeClaimResizing), true},
		{"refused: a condition says why", bound("2Gi", "2Gi", corev1.PersistentVolumeClaimControllerResizeError), true},
	} {
		if got := resizing(tc.real); got != tc.want {
			t.Errorf("%s: resizing %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestResizeConditions(t *testing.T) {
	real := claim(func(p *corev1.PersistentVolumeClaim) {
		p.Status.Conditions = []corev1.PersistentVolumeClaimCondition{
			{Type: corev1.PersistentVolumeClaimControllerResizeError, Status: corev1.ConditionTrue, Reason: "OutOfRange", Message: "8Gi is too large"},
			{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue},
		}
	})
	got := resizeConditions(real, "eu")
	if len(got) != 2 || got[0].Type != corev1.PersistentVolumeClaimControllerResizeError || got[0].Reason != "OutOfRange" ||
		got[0].Message != "In cluster eu: 8Gi is too large" || got[1].Message != "" {
		t.Errorf("conditions shown: %+v", got)
	}
	if real.Status.Conditions[0].Message != "8Gi is too large" {
		t.Errorf("the real claim's own conditions changed: %+v", real.Status.Conditions)
	}
	if got := resizeConditions(claim(nil), "eu"); got != nil {
		t.Errorf("no condition: %+v, want none", got)
	}
}
