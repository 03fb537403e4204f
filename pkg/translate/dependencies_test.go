package translate

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestDependenciesFindsEveryReference(t *testing.T) {
	yes := true
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
		Volumes: []corev1.Volume{
			{Name: "a", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-vol"}}}},
			{Name: "b", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec-vol", Optional: &yes}}},
			{Name: "c", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "sec-proj"}}},
			}}}},
		},
		InitContainers: []corev1.Container{{EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-envfrom"}}}}}},
		Containers: []corev1.Container{{
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sec-vol"}}}},
			Env: []corev1.EnvVar{
				{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-env"}, Key: "k"}}},
				{Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sec-env"}, Key: "k", Optional: &yes}}},
				{Name: "C", Value: "literal"},
			},
		}},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Env: []corev1.EnvVar{{Name: "D", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "sec-debug"}, Key: "k"}}}},
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-debug"}}}},
		}}},
	}}
	cms, secs := Dependencies(pod)
	wantCM := []Ref{{"cm-debug", false}, {"cm-env", false}, {"cm-envfrom", false}, {"cm-vol", false}}
	wantSec := []Ref{{"registry", false}, {"sec-debug", false}, {"sec-env", true}, {"sec-proj", false}, {"sec-vol", false}}
	if len(cms) != len(wantCM) || len(secs) != len(wantSec) {
		t.Fatalf("configmaps %v, secrets %v", cms, secs)
	}
	for i := range wantCM {
		if cms[i] != wantCM[i] {
			t.Errorf("configmap %d = %v, want %v", i, cms[i], wantCM[i])
		}
	}
	for i := range wantSec {
		if secs[i] != wantSec[i] {
			t.Errorf("secret %d = %v, want %v (required wins over optional)", i, secs[i], wantSec[i])
		}
	}
}

func TestCopiesCarryTheOwnerAndLabels(t *testing.T) {
	owner := metav1.OwnerReference{Kind: "FlotillaPrimary", Name: "p"}
	s := SecretCopy(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", Labels: map[string]string{"mine": "x"},
		ResourceVersion: "7", UID: "u"}, Data: map[string][]byte{"k": []byte("v")}, Type: corev1.SecretTypeOpaque}, "p", owner)
	if s.Labels[flotillav1.LabelPrimary] != "p" || s.Annotations[flotillav1.AnnotationOwner] != flotillav1.OwnerReflect || s.OwnerReferences[0].Name != "p" {
		t.Errorf("copy meta = %+v", s.ObjectMeta)
	}
	if s.ResourceVersion != "" || s.UID != "" || string(s.Data["k"]) != "v" || s.Kind != "Secret" {
		t.Errorf("copy = %+v", s)
	}
	c := ConfigMapCopy(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"}, Data: map[string]string{"a": "b"}}, "p", owner)
	if c.Data["a"] != "b" || c.Kind != "ConfigMap" || c.Namespace != "ns" {
		t.Errorf("configmap copy = %+v", c)
	}
}
