package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func rebalanceFixture(t *testing.T, inUS int) client.Client {
	t.Helper()
	node := func(cluster string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: flotillav1.VirtualNodeName(cluster), Labels: map[string]string{flotillav1.LabelCluster: cluster}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourcePods: resource.MustParse("1000")}}}
	}
	objs := []client.Object{node("eu"), node("us")}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range inUS {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("web-%d", i),
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(i) * time.Minute)),
			Labels:            map[string]string{flotillav1.LabelProxy: "true", "app": "web"},
			Annotations:       map[string]string{flotillav1.AnnotationElect: ""},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-rs", UID: types.UID("rs"), Controller: ptr.To(true)}}},
			Spec:   corev1.PodSpec{NodeName: flotillav1.VirtualNodeName("us"), Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}})
	}
	return fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(objs...).Build()
}

func TestRebalanceDryRunPrintsThePlanAndEvictsNothing(t *testing.T) {
	primary := rebalanceFixture(t, 4)
	var out bytes.Buffer
	if err := runRebalance(t.Context(), primary, rebalanceOptions{dryRun: true, timeout: time.Minute, poll: time.Millisecond}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"shop/replicaset web-rs", "us=4", "eu=2,us=2", "web-3 us->eu", "web-2 us->eu", "2 move(s) planned (dry run: nothing evicted)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, out.String())
		}
	}
	var pods corev1.PodList
	if err := primary.List(t.Context(), &pods); err != nil || len(pods.Items) != 4 {
		t.Fatalf("a dry run evicted: %d pods left (%v)", len(pods.Items), err)
	}
}

func TestRebalanceOfABalancedSplitMovesNothing(t *testing.T) {
	primary := rebalanceFixture(t, 1)
	var out bytes.Buffer
	if err := runRebalance(t.Context(), primary, rebalanceOptions{timeout: time.Minute, poll: time.Millisecond}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Balanced: 0 pod(s) moved") {
		t.Errorf("output: %s", out.String())
	}
}

func TestRebalanceRefusesABadSelector(t *testing.T) {
	err := runRebalance(t.Context(), rebalanceFixture(t, 0), rebalanceOptions{selector: "app in (", timeout: time.Minute}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--selector") {
		t.Fatalf("err = %v", err)
	}
}
