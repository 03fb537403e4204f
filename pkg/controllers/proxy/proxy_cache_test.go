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

// cachedProxy is a proxy as the primary's API server serves it: the webhook's affinity and
// tolerations, the user's constraints in their annotation, the primary's token volume.
func cachedProxy() *corev1.Pod {
	raw, _ := json.Marshal(translate.Constraints{NodeSelector: map[string]string{"disk": "ssd"}, HostPorts: map[string]int32{"web/80/TCP": 8080},
		Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}})
	yes := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "demo", UID: "proxy-uid",
			Labels:          map[string]string{"app": "web", flotillav1.LabelProxy: "true"},
			Annotations:     map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationDelegateConstraints: string(raw), "team": "a"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web", Controller: &yes}},
			Finalizers:      []string{flotillav1.FinalizerDelegate}},
		Spec: corev1.PodSpec{
			NodeName:    "flotilla-eu",
			Tolerations: []corev1.Toleration{{Key: flotillav1.TaintVirtualNode, Operator: corev1.TolerationOpExists}},
			Volumes: []corev1.Volume{
				{Name: "kube-api-access-abcde", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
			},
			Containers: []corev1.Container{{Name: "web", Image: "nginx",
				Ports: []corev1.ContainerPort{{ContainerPort: 80}},
				Env: []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access-abcde", MountPath: "/var/run/secrets"}, {Name: "config", MountPath: "/etc/cfg"}}}},
		},
	}
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
			VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access-abcde", MountPath: "/var/run/secrets"}}}}
		p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debug", VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access-abcde"}, {Name: "config"}}}}}
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
