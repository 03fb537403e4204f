package resourcelists

import (
	"fmt"
	"reflect"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
)

func list(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

func same(a, b corev1.ResourceList) bool {
	return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer()
}

func TestShareHandsOutOneListPerShape(t *testing.T) {
	in := newInterner(8)
	first := in.Share(list("1", "1Gi"))
	if again := in.Share(list("1", "1Gi")); !same(first, again) {
		t.Error("two equal lists are not shared")
	}
	if canonicalTwin := in.Share(list("1000m", "1024Mi")); !same(first, canonicalTwin) || !equality.Semantic.DeepEqual(canonicalTwin, list("1000m", "1024Mi")) {
		t.Error("the same quantities written otherwise are not shared, or not equal")
	}
	if other := in.Share(list("2", "1Gi")); same(first, other) {
		t.Error("different lists are shared")
	}
	if got := in.Share(nil); got != nil {
		t.Errorf("nil became %v", got)
	}
	if empty := in.Share(corev1.ResourceList{}); empty == nil {
		t.Error("an empty list became nil")
	}
}

// The table never holds more than its bound; full, it starts afresh and shares again.
func TestShareIsBounded(t *testing.T) {
	in := newInterner(8)
	for i := range 100 {
		in.Share(list(fmt.Sprintf("%dm", i+1), "1Gi"))
		if len(in.shapes) > 8 {
			t.Fatalf("%d shapes held, bound 8", len(in.shapes))
		}
	}
	a := in.Share(list("5", "5Gi"))
	if b := in.Share(list("5", "5Gi")); !same(a, b) {
		t.Error("after the table started afresh, equal lists are not shared")
	}
}

func TestSharePodSharesEveryListAndChangesNothing(t *testing.T) {
	pod := func() *corev1.Pod {
		r := corev1.ResourceRequirements{Requests: list("100m", "64Mi"), Limits: list("200m", "128Mi")}
		return &corev1.Pod{
			Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "init", Resources: *r.DeepCopy()}},
				Containers:     []corev1.Container{{Name: "a", Resources: *r.DeepCopy()}},
				Overhead:       list("10m", "1Mi"),
				Resources:      r.DeepCopy(),
			},
			Status: corev1.PodStatus{
				ContainerStatuses: []corev1.ContainerStatus{{Name: "a", AllocatedResources: list("100m", "64Mi"), Resources: r.DeepCopy()}},
				Resources:         r.DeepCopy(),
			},
		}
	}
	in := newInterner(16)
	a, b := pod(), pod()
	in.SharePod(a)
	in.SharePod(b)
	if !equality.Semantic.DeepEqual(a, pod()) {
		t.Errorf("sharing changed the pod: %+v", a)
	}
	requests := a.Spec.Containers[0].Resources.Requests
	for what, l := range map[string]corev1.ResourceList{
		"init container requests":     a.Spec.InitContainers[0].Resources.Requests,
		"other pod's requests":        b.Spec.Containers[0].Resources.Requests,
		"pod requests":                a.Spec.Resources.Requests,
		"status allocated resources":  a.Status.ContainerStatuses[0].AllocatedResources,
		"status container requests":   a.Status.ContainerStatuses[0].Resources.Requests,
		"other pod's status requests": b.Status.Resources.Requests,
	} {
		if !same(requests, l) {
			t.Errorf("%s: not the shared list", what)
		}
	}
	if !same(a.Spec.Containers[0].Resources.Limits, b.Status.ContainerStatuses[0].Resources.Limits) || !same(a.Spec.Overhead, b.Spec.Overhead) {
		t.Error("limits or overhead not shared")
	}
}

// Caches of many secondaries share from their own goroutines (run with -race).
func TestShareFromManyGoroutines(t *testing.T) {
	in := newInterner(4)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				l := in.Share(list(fmt.Sprintf("%dm", (g+i)%6+1), "1Gi"))
				if q := l[corev1.ResourceCPU]; q.MilliValue() != int64((g+i)%6+1) {
					t.Errorf("asked for %dm, got %s", (g+i)%6+1, q.String())
				}
			}
		})
	}
	wg.Wait()
}
