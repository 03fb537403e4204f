package webhook

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// Builders of the pods and cluster views the webhook's table tests start from.

type podOpt func(*corev1.Pod)

func elected(opts ...podOpt) *corev1.Pod {
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

func annotate(k, v string) podOpt { return func(p *corev1.Pod) { p.Annotations[k] = v } }
func cpu(q string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(q)
	}
}

func clusterOf(name string, ready bool, freeCPU string, nodeLabels map[string]string) ClusterView {
	return ClusterView{Name: name, Ready: ready, Reason: "ProbeFailed",
		Labels: map[string]string{flotillav1.LabelCluster: name, flotillav1.LabelRegion: "region-" + name},
		Nodes: []NodeView{{Name: name + "-n0", Labels: nodeLabels,
			Free: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(freeCPU), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("100")}}}}
}

var twoClusters = []ClusterView{
	clusterOf("eu", true, "4", map[string]string{"disk": "ssd"}),
	clusterOf("us", true, "1", map[string]string{"disk": "hdd"}),
}

func feasibleOf(t *testing.T, p *corev1.Pod) []string {
	t.Helper()
	if p.Spec.Affinity == nil {
		return nil
	}
	terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 || terms[0].MatchExpressions[0].Key != flotillav1.LabelCluster {
		t.Fatalf("proxy affinity = %+v", terms)
	}
	return terms[0].MatchExpressions[0].Values
}
