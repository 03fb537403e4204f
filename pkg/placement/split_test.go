package placement

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestSharesAndPlan(t *testing.T) {
	var pods []*corev1.Pod
	for i := range 5 {
		pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i)}, Spec: corev1.PodSpec{NodeName: flotillav1.VirtualNodeName("us")}})
	}
	even := Plan(pods, []string{"eu", "us"}, nil)
	if even.Want["us"] != 3 || even.Want["eu"] != 2 || len(even.Moves) != 2 {
		t.Errorf("even: want %v, %d moves (the remainder stays where the pods are)", even.Want, len(even.Moves))
	}
	weighted := Plan(pods, []string{"eu", "us"}, map[string]int64{"eu": 80, "us": 20})
	if weighted.Want["eu"] != 4 || weighted.Want["us"] != 1 || len(weighted.Moves) != 4 {
		t.Errorf("80/20: want %v, %d moves", weighted.Want, len(weighted.Moves))
	}
	zero := Plan(pods, []string{"eu", "us"}, map[string]int64{"eu": 0, "us": 1})
	if zero.Want["eu"] != 0 || len(zero.Moves) != 0 {
		t.Errorf("a cluster of weight 0 takes none: %v", zero.Want)
	}
	none := Plan(pods, nil, nil)
	if len(none.Moves) != 0 || len(none.Want) != 0 {
		t.Errorf("no feasible cluster: nothing to move to: %+v", none)
	}
}

func TestWeightsAndChosen(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		flotillav1.AnnotationClusterWeights: "eu=3, us=0", flotillav1.AnnotationClusterSelector: "tier=gold"}}}
	w, err := Weights(pod, []string{"eu", "us", "ap"})
	if err != nil || w["eu"] != 3 || w["us"] != 0 {
		t.Fatalf("Weights = %v, %v", w, err)
	}
	chosen, err := Chosen(pod, []Cluster{{Name: "eu", Labels: map[string]string{"tier": "gold"}}, {Name: "us", Labels: map[string]string{"tier": "gold"}},
		{Name: "ap"}}, w)
	if err != nil || !chosen["eu"] || chosen["us"] || chosen["ap"] {
		t.Fatalf("Chosen = %v, %v; want eu only (us weighs 0, ap is not gold)", chosen, err)
	}
	pod.Annotations[flotillav1.AnnotationClusterWeights] = "mars=1"
	if _, err := Weights(pod, []string{"eu"}); err == nil {
		t.Error("an unknown cluster is refused")
	}
}
