package proxy

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// cachedProxy is a proxy as the primary's API server serves it: the user's constraints in their
// annotation, the webhook's toleration, the primary's token volume beside the user's volume.
func cachedProxy() *corev1.Pod {
	raw, _ := json.Marshal(translate.Constraints{Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}})
	token := corev1.Volume{Name: "kube-api-access-x1y2z", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}}
	user := corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	p := &corev1.Pod{}
	p.Name, p.Namespace, p.UID = "web-1", "demo", "proxy-uid"
	p.Labels = map[string]string{flotillav1.LabelProxy: "true"}
	p.Annotations = map[string]string{flotillav1.AnnotationDelegateConstraints: string(raw)}
	p.Spec.NodeName = "flotilla-eu"
	p.Spec.Tolerations = []corev1.Toleration{{Key: flotillav1.TaintVirtualNode, Operator: corev1.TolerationOpExists}}
	p.Spec.Volumes = []corev1.Volume{token, user}
	p.Spec.Containers = []corev1.Container{{Name: "web", Image: "nginx", Env: []corev1.EnvVar{{Name: "MODE", Value: "a"}},
		VolumeMounts: []corev1.VolumeMount{{Name: token.Name}, {Name: user.Name, MountPath: "/etc/cfg"}}}}
	return p
}

// The proxy cache keeps proxies slimmed: what it drops must be what Delegate drops, so a delegate
// made from the cache is the one made from the whole proxy.
func TestSlimProxyDropsOnlyWhatDelegateDrops(t *testing.T) {
	whole := func() *corev1.Pod {
		p := cachedProxy()
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: flotillav1.LabelCluster, Operator: corev1.NodeSelectorOpIn, Values: []string{"eu", "us"}}}}}}}}
		p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox",
			VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access-x1y2z", MountPath: "/var/run/secrets"}}}}
		p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debug", VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access-x1y2z"}, {Name: "config"}}}}}
		return p
	}
	want, err := translate.Delegate(whole(), "pid", translate.Owner("pid", "fp-uid"))
	if err != nil {
		t.Fatal(err)
	}
	decoded := whole()
	volumes := decoded.Spec.Volumes
	obj, err := SlimProxy(decoded)
	if err != nil {
		t.Fatal(err)
	}
	slim := obj.(*corev1.Pod)
	// What was dropped is gone from the array too: a kept volume must not hold the token's
	// source behind the slice's end (the 10,000-pod heap still held 6 MB of them).
	for _, v := range volumes[len(slim.Spec.Volumes):] {
		if v.Projected != nil || v.Name != "" {
			t.Errorf("the volumes' array still holds %q past the kept ones", v.Name)
		}
	}
	got, err := translate.Delegate(slim, "pid", translate.Owner("pid", "fp-uid"))
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(want, got) {
		t.Errorf("the delegate of the cached proxy differs:\n whole %+v\n cache %+v", want.Spec, got.Spec)
	}
	if slim.ManagedFields != nil || len(slim.Spec.Volumes) != 1 || slim.Spec.Volumes[0].Name != "config" ||
		len(slim.Spec.Containers[0].VolumeMounts) != 1 || len(slim.Spec.InitContainers[0].VolumeMounts) != 0 ||
		len(slim.Spec.EphemeralContainers[0].VolumeMounts) != 1 {
		t.Errorf("the cached proxy keeps the primary's token or its managedFields: %+v", slim.Spec)
	}
	if slim.Spec.Affinity != nil || slim.Spec.Tolerations != nil {
		t.Errorf("the cached proxy keeps the webhook's affinity or tolerations: %+v, %+v", slim.Spec.Affinity, slim.Spec.Tolerations)
	}
	if len(slim.Spec.Containers[0].Env) != 1 || slim.Annotations[flotillav1.AnnotationDelegateConstraints] == "" || slim.Spec.NodeName == "" {
		t.Errorf("the cached proxy lost what Flotilla reads: %+v", slim)
	}
	if again, err := SlimProxy(slim); err != nil || !equality.Semantic.DeepEqual(again, slim) {
		t.Errorf("SlimProxy is not idempotent: %v", err)
	}
}
