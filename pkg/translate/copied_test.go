package translate

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestKeepCopied(t *testing.T) {
	yes, no := true, false
	spec := func() *corev1.PodSpec {
		return &corev1.PodSpec{
			Volumes: []corev1.Volume{
				{Name: "root", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db-root", Optional: &yes}}},
				{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}, Optional: &yes}}},
				{Name: "mixed", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "db-root"}, Optional: &yes}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}, Optional: &yes}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
				}}}},
			},
			Containers: []corev1.Container{{Name: "c",
				Env: []corev1.EnvVar{
					{Name: "PLAIN", Value: "v"},
					{Name: "ROOT", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "db-root"}, Key: "password", Optional: &yes}}},
					{Name: "CONF", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}, Key: "k", Optional: &no}}},
				},
				EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db-root"}, Optional: &yes}}},
			}},
		}
	}

	t.Run("what was copied stays as written", func(t *testing.T) {
		s := spec()
		want := spec()
		if missing := KeepCopied(s, Copied{ConfigMaps: map[string]bool{"conf": true}, Secrets: map[string]bool{"db-root": true}}); len(missing) != 0 {
			t.Fatalf("missing %v", missing)
		}
		if !reflect.DeepEqual(s, want) {
			t.Fatalf("changed:\n%+v", s)
		}
	})

	t.Run("an optional Secret not copied is never the secondary's own", func(t *testing.T) {
		s := spec()
		missing := KeepCopied(s, Copied{ConfigMaps: map[string]bool{"conf": true}})
		if len(missing) != 0 {
			t.Fatalf("missing %v", missing)
		}
		if s.Volumes[0].Secret != nil || s.Volumes[0].EmptyDir == nil {
			t.Errorf("optional Secret volume: %+v, want an empty directory", s.Volumes[0].VolumeSource)
		}
		if n := len(s.Volumes[2].Projected.Sources); n != 2 || s.Volumes[2].Projected.Sources[0].Secret != nil {
			t.Errorf("projected sources: %+v", s.Volumes[2].Projected.Sources)
		}
		if env := s.Containers[0].Env; len(env) != 2 || env[0].Name != "PLAIN" || env[1].Name != "CONF" {
			t.Errorf("env: %+v", env)
		}
		if s.Containers[0].EnvFrom != nil {
			t.Errorf("envFrom: %+v", s.Containers[0].EnvFrom)
		}
	})

	t.Run("a required reference not copied is said, and kept", func(t *testing.T) {
		s := spec()
		s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
		missing := KeepCopied(s, Copied{})
		if want := []string{"ConfigMap conf", "Secret pull"}; !reflect.DeepEqual(missing, want) {
			t.Fatalf("missing %v, want %v", missing, want)
		}
		if s.Volumes[1].EmptyDir == nil {
			t.Error("the optional ConfigMap volume stays")
		}
		if src := s.Volumes[2].Projected.Sources; len(src) != 1 || src[0].ConfigMap.Name != "kube-root-ca.crt" {
			t.Errorf("each cluster's own CA stays: %+v", src)
		}
	})

	t.Run("a projected volume left with no source is an empty directory", func(t *testing.T) {
		s := &corev1.PodSpec{Volumes: []corev1.Volume{{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}, Optional: &yes}}}}}}}}
		KeepCopied(s, Copied{})
		if s.Volumes[0].Projected != nil || s.Volumes[0].EmptyDir == nil {
			t.Fatalf("%+v", s.Volumes[0].VolumeSource)
		}
	})
}

// kubectl debug's containers resolve what they name where the delegate runs: never the
// secondary's own Secret of that name.
func TestKeepCopiedEphemeralContainers(t *testing.T) {
	yes := true
	debug := func() *corev1.PodSpec {
		return &corev1.PodSpec{EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debugger",
			Env: []corev1.EnvVar{
				{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "theirs"}, Key: "token"}}},
				{Name: "MAYBE", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "other"}, Key: "k", Optional: &yes}}},
			},
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}, Optional: &yes}}},
		}}}}
	}
	s := debug()
	if missing := KeepCopied(s, Copied{}); !reflect.DeepEqual(missing, []string{"Secret theirs"}) {
		t.Fatalf("missing %v, want the required Secret", missing)
	}
	c := s.EphemeralContainers[0]
	if len(c.Env) != 1 || c.Env[0].Name != "TOKEN" || c.EnvFrom != nil {
		t.Errorf("the optional references not copied stay: env %+v, envFrom %+v", c.Env, c.EnvFrom)
	}
	s = debug()
	if missing := KeepCopied(s, Copied{Secrets: map[string]bool{"theirs": true, "other": true}, ConfigMaps: map[string]bool{"conf": true}}); len(missing) != 0 {
		t.Fatalf("missing %v", missing)
	}
	if !reflect.DeepEqual(s, debug()) {
		t.Errorf("what was copied changed: %+v", s.EphemeralContainers)
	}
}

func TestNotOffloadable(t *testing.T) {
	ok := &corev1.PodSpec{Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "copied"}}},
		{Name: "c", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "inline"}}}}}
	if p := NotOffloadable(ok); p != nil {
		t.Fatalf("refused: %v", p)
	}
	bad := &corev1.PodSpec{SchedulerName: "volcano", ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu"}},
		Volumes: []corev1.Volume{{Name: "c", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d",
			NodePublishSecretRef: &corev1.LocalObjectReference{Name: "db-root"}}}}}}
	// DRA claims follow their pod (the delegate's secondary allocates them): not a problem.
	if p := NotOffloadable(bad); len(p) != 2 {
		t.Fatalf("problems %v, want 2", p)
	}
	// An inline CSI volume whose driver reads an object of the namespace where the pod runs.
	spc := &corev1.PodSpec{Volumes: []corev1.Volume{{Name: "vault", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
		Driver: "secrets-store.csi.k8s.io", VolumeAttributes: map[string]string{"secretProviderClass": "team-vault"}}}}}}
	if p := NotOffloadable(spc); len(p) != 1 || !strings.Contains(p[0], "SecretProviderClass") {
		t.Fatalf("problems %v, want the SecretProviderClass named", p)
	}
}

func TestCopiedAddRecordsWhatKeepCopiedKeeps(t *testing.T) {
	var c Copied
	c.Add(KindConfigMap, "conf")
	c.Add(KindSecret, "db")
	c.Add(KindService, "web")
	if !c.ConfigMaps["conf"] || !c.Secrets["db"] || len(c.ConfigMaps) != 1 || len(c.Secrets) != 1 {
		t.Errorf("copied = %+v", c)
	}
}
