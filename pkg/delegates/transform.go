package delegates

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-dev/flotilla/internal/resourcelists"
)

// slim is the delegate cache's transform: a delegate keeps what Flotilla reads of it, and
// nothing else stays in memory for each of the pods it runs.
//   - Its metadata, without managedFields: the proxy UID annotation, the owner reference, the
//     deletion timestamp, the resourceVersion of an optimistic lock.
//   - Its node, and each container's name, image and resources: what the proxy controller
//     compares with the proxy to carry an image update or an in-place resize, and the base of the
//     strategic-merge patch that carries it (the patch holds only what changed, so the fields
//     left out here never enter it). Ephemeral containers by name: they are only ever added.
//   - Its DRA claims (spec.resourceClaims): the proxy says which devices they were given.
//   - Its whole status: the proxy's status is made of it.
//
// Left out: volumes (the secondary's own service-account token projection among them),
// tolerations, environment, probes, mounts, security contexts: the delegate was made from the
// proxy, which has them, and nothing of Flotilla reads them back.
func slim(obj any) (any, error) {
	d, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{TypeMeta: d.TypeMeta, ObjectMeta: d.ObjectMeta, Status: d.Status}
	out.ManagedFields = nil
	out.Spec.NodeName = d.Spec.NodeName
	out.Spec.ResourceClaims = d.Spec.ResourceClaims
	out.Spec.Containers = keptContainers(d.Spec.Containers)
	out.Spec.InitContainers = keptContainers(d.Spec.InitContainers)
	if len(d.Spec.EphemeralContainers) > 0 {
		out.Spec.EphemeralContainers = make([]corev1.EphemeralContainer, len(d.Spec.EphemeralContainers))
		for i, c := range d.Spec.EphemeralContainers {
			out.Spec.EphemeralContainers[i].Name = c.Name
		}
	}
	// Its resource lists are the same as its proxy's and its siblings': one list for them all.
	resourcelists.SharePod(out)
	return out, nil
}

// keptContainers are a delegate's containers as the cache keeps them: name, image, resources and
// restart policy (a sidecar's).
func keptContainers(in []corev1.Container) []corev1.Container {
	if in == nil {
		return nil
	}
	out := make([]corev1.Container, len(in))
	for i, c := range in {
		out[i] = corev1.Container{Name: c.Name, Image: c.Image, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
	}
	return out
}
