package proxy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/seal"
)

var admissionKey = seal.Key("0123456789abcdef0123456789abcdef")

// webhookProxy is a proxy as the webhook makes it: allowed clusters east and west, sealed.
func webhookProxy(change func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web",
			Labels:      map[string]string{flotillav1.LabelProxy: "true"},
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationDelegateConstraints: `{}`},
			Finalizers:  []string{flotillav1.FinalizerDelegate}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: flotillav1.LabelCluster, Operator: corev1.NodeSelectorOpIn, Values: []string{"east", "west"}}},
				}}}}}},
	}
	if change != nil {
		change(p)
	}
	p.Annotations[flotillav1.AnnotationSeal] = seal.Stamp(admissionKey, p)
	return p
}

// forgedProxy is the pod a tenant with edit rights created on the demo's bed and got a delegate
// for: labelled flotilla.dev/primary (so the webhook skipped it), bound by hand, mounting the
// secondary's PVC.
func forgedProxy() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "forged",
			Labels:      map[string]string{flotillav1.LabelPrimary: "x", flotillav1.LabelProxy: "true"},
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationDelegateConstraints: "{}"}},
		Spec: corev1.PodSpec{NodeName: "flotilla-east", Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "db-data"}}}}},
	}
}

func TestNotAdmitted(t *testing.T) {
	cases := []struct {
		name    string
		proxy   *corev1.Pod
		cluster string
		key     seal.Key
		expect  string // "" admitted, else a part of the reason
	}{
		{"the webhook's proxy on an allowed cluster", webhookProxy(nil), "east", admissionKey, ""},
		{"as the proxy cache keeps it: without the webhook's affinity", func() *corev1.Pod {
			p := webhookProxy(nil)
			cached, _ := SlimProxy(p)
			return cached.(*corev1.Pod)
		}(), "west", admissionKey, ""},
		{"the forged proxy of the demo's bed", forgedProxy(), "east", admissionKey, "no admission seal"},
		{"a manager without the key gives no delegate", webhookProxy(nil), "east", nil, "does not match"},
		{"constraints changed after the seal", func() *corev1.Pod {
			p := webhookProxy(nil)
			p.Annotations[flotillav1.AnnotationDelegateConstraints] = `{"hostNetwork":true}`
			return p
		}(), "east", admissionKey, "does not match"},
		{"a seal copied onto a pod with an ephemeral volume", webhookProxy(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}}
		}), "east", admissionKey, "ephemeral volume"},
		{"a CSI volume with a Secret Flotilla does not copy", webhookProxy(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
				Driver: "d", NodePublishSecretRef: &corev1.LocalObjectReference{Name: "db-root"}}}}}
		}), "east", admissionKey, "csi.nodePublishSecretRef"},
		{"another scheduler", webhookProxy(func(p *corev1.Pod) { p.Spec.SchedulerName = "mine" }), "east", admissionKey, "scheduler mine"},
		{"bound to a cluster its admission did not allow", webhookProxy(nil), "north", admissionKey, "did not allow"},
		{"bound outside the user's cluster list", webhookProxy(func(p *corev1.Pod) {
			p.Annotations[flotillav1.AnnotationClusters] = "west"
		}), "east", admissionKey, "does not name"},
		{"in the user's cluster list", webhookProxy(func(p *corev1.Pod) {
			p.Annotations[flotillav1.AnnotationClusters] = "west, east"
		}), "east", admissionKey, ""},
		{"without the delegate finalizer", func() *corev1.Pod {
			p := webhookProxy(nil)
			p.Finalizers = nil
			return p
		}(), "east", admissionKey, "lacks the finalizer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := notAdmitted(tc.proxy, tc.cluster, tc.key)
			switch {
			case tc.expect == "" && got != "":
				t.Fatalf("refused: %s", got)
			case tc.expect != "" && !strings.Contains(got, tc.expect):
				t.Fatalf("notAdmitted = %q, want it to say %q", got, tc.expect)
			}
		})
	}
}
