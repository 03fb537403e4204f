package cli

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestRenderPodShowsTheDelegateAfterTheClustersOverrides(t *testing.T) {
	proxy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-0", Labels: map[string]string{flotillav1.LabelProxy: "true", "app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}
	mirror := &flotillav1.Override{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "mirror"}, Spec: flotillav1.OverrideSpec{Rules: []flotillav1.OverrideRule{{
		Name: "eu-registry", Targets: []flotillav1.OverrideTarget{{Kind: "Pod", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
		Clusters: flotillav1.OverrideClusters{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{flotillav1.LabelRegion: "eu"}}},
		Image:    &flotillav1.ImageOverride{Registry: "mirror.eu.example.com"}}}}}
	nodes := []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-eu-1", Labels: map[string]string{flotillav1.LabelCluster: "eu-1", flotillav1.LabelRegion: "eu"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-us-1", Labels: map[string]string{flotillav1.LabelCluster: "us-1", flotillav1.LabelRegion: "us"}}},
	}
	c := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(proxy, mirror, nodes[0], nodes[1],
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: "p1"}}).Build()
	for cluster, want := range map[string][]string{
		"eu-1": {"changed by:\n#   Override shop/mirror rule eu-registry", "image: mirror.eu.example.com/nginx:1.27", flotillav1.AnnotationOverrides},
		"us-1": {"no Override rule applies", "image: nginx:1.27"},
	} {
		var out bytes.Buffer
		if err := runRenderPod(t.Context(), c, "shop", "web-0", cluster, &out); err != nil {
			t.Fatalf("%s: %v", cluster, err)
		}
		for _, w := range want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: the output lacks %q:\n%s", cluster, w, out.String())
			}
		}
	}
	var out bytes.Buffer
	if err := runRenderPod(t.Context(), c, "kube-system", "nothing", "eu-1", &out); err == nil {
		t.Error("a pod that does not exist renders")
	}
}

func TestRenderReplicatorShowsEachCopyAfterTheClustersOverridesAndNoSecretValue(t *testing.T) {
	three := int32(3)
	manifest := func(raw string) flotillav1.Manifest {
		var m flotillav1.Manifest
		if err := m.UnmarshalJSON([]byte(raw)); err != nil {
			t.Fatal(err)
		}
		return m
	}
	rep := &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: flotillav1.ReplicatorSpec{ReplicationNamespace: "shop",
		DeploymentName: "web", DeploymentSpec: &flotillav1.ReplicatedDeploymentSpec{Replicas: &three, Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}},
		Resources: []flotillav1.Manifest{manifest(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"token"},"stringData":{"password":"hunter2"}}`)}}}
	small := &flotillav1.Override{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "small"}, Spec: flotillav1.OverrideSpec{Rules: []flotillav1.OverrideRule{{
		Name: "edge", Targets: []flotillav1.OverrideTarget{{Kind: "Deployment"}},
		Clusters: flotillav1.OverrideClusters{Names: []string{"edge-1"}}, Replicas: ptrTo(int32(1))}}}}
	c := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(rep, small,
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-edge-1", Labels: map[string]string{flotillav1.LabelCluster: "edge-1"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: "p1"}}).Build()
	var out bytes.Buffer
	if err := runRenderReplicator(t.Context(), c, "web", "edge-1", &out); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"# Deployment web, changed by: Override shop/small rule edge", "replicas: 1", "namespace: shop",
		"# Secret token: no Override rule applies", "password: (7 characters, not printed)"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("the output lacks %q:\n%s", w, out.String())
		}
	}
	if strings.Contains(out.String(), "hunter2") {
		t.Errorf("a Secret's value is printed:\n%s", out.String())
	}
}

func ptrTo[T any](v T) *T { return &v }
