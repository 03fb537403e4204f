package proxy

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-dev/flotilla/internal/resourcelists"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// SlimProxy is the transform of the primary's proxy cache. A proxy stays whole but for what no
// part of Flotilla reads back from it:
//   - its managedFields;
//   - the primary's token volume and its mounts, which translate.Delegate drops (a delegate gets its
//     secondary's);
//   - the webhook's node affinity (the clusters that fit) and tolerations: they are for the
//     primary's scheduler and node lifecycle controller; translate.Delegate takes the user's from the
//     delegate-constraints annotation.
//
// Its resource lists become lists shared with its siblings and its delegate. The proxy in the
// primary keeps all of it. SlimProxy changes the object it is given, which the cache has just
// decoded and no one else holds.
func SlimProxy(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	p.ManagedFields = nil
	p.Spec.Affinity, p.Spec.Tolerations = nil, nil
	tokens := map[string]bool{}
	for _, v := range p.Spec.Volumes {
		if translate.IsPrimaryToken(v) {
			tokens[v.Name] = true
		}
	}
	if len(tokens) > 0 {
		// DeleteFunc clears the tail, or the dropped volumes would stay in the array.
		p.Spec.Volumes = slices.DeleteFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return tokens[v.Name] })
		drop := func(m corev1.VolumeMount) bool { return tokens[m.Name] }
		for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for i := range list {
				list[i].VolumeMounts = slices.DeleteFunc(list[i].VolumeMounts, drop)
			}
		}
		for i := range p.Spec.EphemeralContainers {
			c := &p.Spec.EphemeralContainers[i].EphemeralContainerCommon
			c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, drop)
		}
	}
	resourcelists.SharePod(p)
	return p, nil
}
