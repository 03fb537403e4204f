package resourcelists

import (
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// maxShapes bounds the table. When it is full it starts afresh: the lists already shared stay
// with the objects that hold them, and the shapes in use now are shared again from then on. A
// cluster whose pods each request something else (vertical autoscaling) cannot grow it without
// bound.
const maxShapes = 4096

// interner hands out one list for each distinct resource list. The manager has one (shared); the
// specs make their own, with a small bound.
type interner struct {
	max int

	mu     sync.Mutex
	shapes map[string]corev1.ResourceList // by canonical text: "cpu=1,memory=1Gi,"
}

// newInterner returns an interner holding at most max shapes at once.
func newInterner(max int) *interner { return &interner{max: max} }

// shared is the interner of every cache of the manager: a proxy and its delegate request the same.
var shared = newInterner(maxShapes)

// Share is the shared interner's Share.
func Share(list corev1.ResourceList) corev1.ResourceList { return shared.Share(list) }

// SharePod is the shared interner's SharePod.
func SharePod(p *corev1.Pod) { shared.SharePod(p) }

// Share returns the list equal to list that the interner hands out, list itself for a shape it
// had not seen. Nil or empty lists stay as they are (an empty list is not a nil one to
// equality.Semantic).
func (in *interner) Share(list corev1.ResourceList) corev1.ResourceList {
	if len(list) == 0 {
		return list
	}
	key := canonical(list)
	in.mu.Lock()
	defer in.mu.Unlock()
	if s, ok := in.shapes[key]; ok {
		return s
	}
	if in.shapes == nil || len(in.shapes) >= in.max {
		in.shapes = make(map[string]corev1.ResourceList, min(in.max, 64))
	}
	in.shapes[key] = list
	return list
}

// SharePod replaces, in place, every resource list of a pod by the shared one: its containers'
// requests and limits (init and ephemeral containers too), the pod's resources and overhead, and
// the resources and allocated resources its status reports for each container.
func (in *interner) SharePod(p *corev1.Pod) {
	share := func(r *corev1.ResourceRequirements) {
		r.Requests, r.Limits = in.Share(r.Requests), in.Share(r.Limits)
	}
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			share(&list[i].Resources)
		}
	}
	for i := range p.Spec.EphemeralContainers {
		share(&p.Spec.EphemeralContainers[i].Resources)
	}
	if p.Spec.Resources != nil {
		share(p.Spec.Resources)
	}
	p.Spec.Overhead = in.Share(p.Spec.Overhead)
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses} {
		for i := range list {
			list[i].AllocatedResources = in.Share(list[i].AllocatedResources)
			if list[i].Resources != nil {
				share(list[i].Resources)
			}
		}
	}
	if p.Status.Resources != nil {
		share(p.Status.Resources)
	}
}

// canonical is a list's text with its names in order and each quantity in canonical form.
func canonical(list corev1.ResourceList) string {
	names := make([]string, 0, len(list))
	for name := range list {
		names = append(names, string(name))
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		q := list[corev1.ResourceName(name)]
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(q.String())
		b.WriteByte(',')
	}
	return b.String()
}
