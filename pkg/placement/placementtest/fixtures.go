// Package placementtest builds the pods and cluster views that placement's table tests, and the
// webhook's, start from.
package placementtest

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

// PodOpt changes a pod Elected builds.
type PodOpt func(*corev1.Pod)

// Elected is pod demo/web, elected, with one container asking for 100m CPU, changed by opts.
func Elected(opts ...PodOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo", Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Annotate sets an annotation.
func Annotate(k, v string) PodOpt { return func(p *corev1.Pod) { p.Annotations[k] = v } }

// CPU sets the first container's CPU request.
func CPU(q string) PodOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(q)
	}
}

// WithClaims gives the pod a volume of each claim named.
func WithClaims(names ...string) PodOpt {
	return func(p *corev1.Pod) {
		for _, n := range names {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "v-" + n,
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: n}}})
		}
	}
}

// ClusterOf is a cluster of one node with the given labels and free CPU (8Gi memory, 100 pods).
func ClusterOf(name string, ready bool, freeCPU string, nodeLabels map[string]string) placement.ClusterView {
	return placement.ClusterView{Name: name, Ready: ready, Reason: "ProbeFailed",
		Labels: map[string]string{flotillav1.LabelCluster: name, flotillav1.LabelRegion: "region-" + name},
		Nodes: []placement.NodeView{{Name: name + "-n0", Labels: nodeLabels,
			Free: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(freeCPU), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("100")}}}}
}

// TwoClusters are eu (4 CPUs free, disk=ssd) and us (1 CPU free, disk=hdd), both Ready.
func TwoClusters() []placement.ClusterView {
	return []placement.ClusterView{
		ClusterOf("eu", true, "4", map[string]string{"disk": "ssd"}),
		ClusterOf("us", true, "1", map[string]string{"disk": "hdd"}),
	}
}

// Cordoned is v with its virtual node cordoned.
func Cordoned(v placement.ClusterView) placement.ClusterView { v.Cordoned = true; return v }

// NoClaims is v registered to take no claims of class flotilla.
func NoClaims(v placement.ClusterView) placement.ClusterView { v.NoClaims = true; return v }

// LostFor is v with its virtual node failover-tainted for d.
func LostFor(v placement.ClusterView, d time.Duration) placement.ClusterView {
	v.UnreachableFor = d
	return v
}

// Draining is v being drained.
func Draining(v placement.ClusterView) placement.ClusterView { v.Draining = true; return v }
