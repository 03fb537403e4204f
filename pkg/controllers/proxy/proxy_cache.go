package proxy

import (
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
	translate.DropPrimaryToken(&p.Spec)
	resourcelists.SharePod(p)
	return p, nil
}
