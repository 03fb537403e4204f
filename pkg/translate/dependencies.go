package translate

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kinds of objects copied to secondaries (DependencyKinds).
const (
	KindConfigMap      = "ConfigMap"
	KindSecret         = "Secret"
	KindServiceAccount = "ServiceAccount"
	KindService        = "Service"
	KindNetworkPolicy  = "NetworkPolicy"
	KindIngress        = "Ingress"
)

// Ref is a referenced ConfigMap or Secret.
type Ref struct {
	Name     string
	Optional bool
}

// Dependencies lists the ConfigMaps and Secrets a pod references, sorted, each once (required
// wins over optional).
func Dependencies(pod *corev1.Pod) (configMaps, secrets []Ref) {
	cms, secs := map[string]bool{}, map[string]bool{}
	add := func(m map[string]bool, name string, optional *bool) {
		if name == "" {
			return
		}
		opt := optional != nil && *optional
		if prev, ok := m[name]; ok {
			m[name] = prev && opt
			return
		}
		m[name] = opt
	}
	volumeDependencies(pod.Spec.Volumes, func(cm bool, name string, optional *bool) {
		if cm {
			add(cms, name, optional)
		} else {
			add(secs, name, optional)
		}
	})
	envDependencies := func(env []corev1.EnvVar, from []corev1.EnvFromSource) {
		for _, e := range from {
			if e.ConfigMapRef != nil {
				add(cms, e.ConfigMapRef.Name, e.ConfigMapRef.Optional)
			}
			if e.SecretRef != nil {
				add(secs, e.SecretRef.Name, e.SecretRef.Optional)
			}
		}
		for _, e := range env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				add(cms, r.Name, r.Optional)
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				add(secs, r.Name, r.Optional)
			}
		}
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			envDependencies(c.Env, c.EnvFrom)
		}
	}
	// `kubectl debug`'s containers resolve their references where the delegate runs, as the
	// pod's own do: what they name is copied, and kept while the pod lives.
	for _, c := range pod.Spec.EphemeralContainers {
		envDependencies(c.Env, c.EnvFrom)
	}
	f := false
	for _, s := range pod.Spec.ImagePullSecrets {
		add(secs, s.Name, &f)
	}
	delete(cms, "kube-root-ca.crt") // every cluster publishes its own
	return sorted(cms), sorted(secs)
}

func sorted(m map[string]bool) []Ref {
	out := make([]Ref, 0, len(m))
	for name, opt := range m {
		out = append(out, Ref{Name: name, Optional: opt})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// volumeDependencies calls ref for each ConfigMap (cm true) or Secret a volume references.
func volumeDependencies(volumes []corev1.Volume, ref func(cm bool, name string, optional *bool)) {
	for _, v := range volumes {
		if v.ConfigMap != nil {
			ref(true, v.ConfigMap.Name, v.ConfigMap.Optional)
		}
		if v.Secret != nil {
			ref(false, v.Secret.SecretName, v.Secret.Optional)
		}
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ConfigMap != nil {
				ref(true, src.ConfigMap.Name, src.ConfigMap.Optional)
			}
			if src.Secret != nil {
				ref(false, src.Secret.Name, src.Secret.Optional)
			}
		}
	}
}

// Uses says whether a proxy references (ConfigMap, Secret, ServiceAccount) or is selected by
// (Service, NetworkPolicy) an object of the primary of a kind of DependencyKinds. An Ingress is
// used through its backend Services: Uses of each of them.
func Uses(proxy *corev1.Pod, kind string, obj metav1.Object) bool {
	k, ok := DependencyKindOf(kind)
	if !ok {
		return false
	}
	switch k.Use {
	case UseSelector:
		o, ok := obj.(Object)
		return ok && k.Selects(o, proxy)
	case UseReference:
		for _, ref := range k.References(proxy) {
			if ref.Name == obj.GetName() {
				return true
			}
		}
	}
	return false
}
