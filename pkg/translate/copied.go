package translate

import (
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// Copied names the ConfigMaps and Secrets copied to a secondary for one delegate.
type Copied struct {
	ConfigMaps, Secrets map[string]bool
}

// Add records that the object of kind named name was copied (ConfigMaps and Secrets: the kinds a
// pod spec's references KeepCopied keeps; other kinds are not recorded).
func (c *Copied) Add(kind, name string) {
	switch kind {
	case KindConfigMap:
		c.ConfigMaps = addName(c.ConfigMaps, name)
	case KindSecret:
		c.Secrets = addName(c.Secrets, name)
	}
}

func addName(names map[string]bool, name string) map[string]bool {
	if names == nil {
		names = map[string]bool{}
	}
	names[name] = true
	return names
}

// publishedByEveryCluster are ConfigMaps each cluster publishes in every namespace: a reference
// to one means the cluster the pod runs in (the CA of its own API server), so it stays.
var publishedByEveryCluster = map[string]bool{"kube-root-ca.crt": true}

// KeepCopied makes a delegate's spec (its containers of every sort, `kubectl debug`'s ephemeral
// ones included) name only ConfigMaps and Secrets in copied: an optional
// reference to any other is removed, as Kubernetes would resolve a missing optional one (an
// optional ConfigMap or Secret volume becomes an empty directory, an optional projected source,
// env var or envFrom entry goes). Without it, the secondary's own object of that name would be
// read. It returns the required references not copied, "Kind name" each, sorted; the delegate
// must wait for them.
func KeepCopied(spec *corev1.PodSpec, copied Copied) []string {
	required := map[string]bool{}
	keep := func(cm bool, name string, optional *bool) bool {
		if cm && (copied.ConfigMaps[name] || publishedByEveryCluster[name]) || !cm && copied.Secrets[name] {
			return true
		}
		if optional == nil || !*optional {
			kind := "Secret "
			if cm {
				kind = "ConfigMap "
			}
			required[kind+name] = true
			return true // kept: the delegate is not created while it is missing
		}
		return false
	}
	for i := range spec.Volumes {
		keepVolume(&spec.Volumes[i], keep)
	}
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			list[i].Env, list[i].EnvFrom = keepEnv(list[i].Env, list[i].EnvFrom, keep)
		}
	}
	for i := range spec.EphemeralContainers {
		c := &spec.EphemeralContainers[i].EphemeralContainerCommon
		c.Env, c.EnvFrom = keepEnv(c.Env, c.EnvFrom, keep)
	}
	for _, s := range spec.ImagePullSecrets {
		no := false
		keep(false, s.Name, &no)
	}
	out := make([]string, 0, len(required))
	for r := range required {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

func keepVolume(v *corev1.Volume, keep func(cm bool, name string, optional *bool) bool) {
	switch {
	case v.ConfigMap != nil && !keep(true, v.ConfigMap.Name, v.ConfigMap.Optional),
		v.Secret != nil && !keep(false, v.Secret.SecretName, v.Secret.Optional):
		v.VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	case v.Projected != nil:
		v.Projected.Sources = slices.DeleteFunc(v.Projected.Sources, func(src corev1.VolumeProjection) bool {
			return src.ConfigMap != nil && !keep(true, src.ConfigMap.Name, src.ConfigMap.Optional) ||
				src.Secret != nil && !keep(false, src.Secret.Name, src.Secret.Optional)
		})
		if len(v.Projected.Sources) == 0 {
			v.VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
		}
	}
}

func keepEnv(env []corev1.EnvVar, from []corev1.EnvFromSource, keep func(cm bool, name string, optional *bool) bool) ([]corev1.EnvVar, []corev1.EnvFromSource) {
	env = slices.DeleteFunc(env, func(e corev1.EnvVar) bool {
		if e.ValueFrom == nil {
			return false
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			return !keep(true, r.Name, r.Optional)
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			return !keep(false, r.Name, r.Optional)
		}
		return false
	})
	from = slices.DeleteFunc(from, func(e corev1.EnvFromSource) bool {
		return e.ConfigMapRef != nil && !keep(true, e.ConfigMapRef.Name, e.ConfigMapRef.Optional) ||
			e.SecretRef != nil && !keep(false, e.SecretRef.Name, e.SecretRef.Optional)
	})
	return nilIfEmpty(env), nilIfEmpty(from)
}
