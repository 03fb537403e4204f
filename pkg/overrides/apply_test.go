package overrides

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func deployment() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "labels": map[string]any{"app": "web"}},
		"spec": map[string]any{"replicas": int64(10), "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "web", "image": "nginx:1.27", "env": []any{map[string]any{"name": "REGION", "value": "none"}}},
				map[string]any{"name": "sidecar", "image": "envoy:v1"}}}}},
	}}
}

var eu = Cluster{Name: "eu-1", Labels: map[string]string{flotillav1.LabelRegion: "eu"}}

func rule(name string, change func(*flotillav1.OverrideRule)) flotillav1.OverrideRule {
	r := flotillav1.OverrideRule{Name: name, Targets: []flotillav1.OverrideTarget{{Kind: "Deployment", Names: []string{"web"}}},
		Clusters: flotillav1.OverrideClusters{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{flotillav1.LabelRegion: "eu"}}}}
	change(&r)
	return r
}

func TestApplyInOrderAdminsFirst(t *testing.T) {
	sources := []Source{
		{Kind: "Override", Namespace: "shop", Name: "b", Spec: flotillav1.OverrideSpec{Rules: []flotillav1.OverrideRule{
			rule("replicas", func(r *flotillav1.OverrideRule) { r.Replicas = ptr.To[int32](2) }),
			rule("env", func(r *flotillav1.OverrideRule) {
				r.Containers = []string{"web"}
				r.Env = []flotillav1.EnvOverride{{Op: "Replace", Name: "REGION", Value: "eu"}, {Op: "Add", Name: "MIRROR", Value: "yes"}}
			}),
		}}},
		{Kind: "ClusterOverride", Name: "z-registry", Spec: flotillav1.OverrideSpec{Rules: []flotillav1.OverrideRule{
			rule("mirror", func(r *flotillav1.OverrideRule) {
				r.Image = &flotillav1.ImageOverride{Registry: "mirror.eu"}
				r.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
			}),
			rule("elsewhere", func(r *flotillav1.OverrideRule) {
				r.Clusters = flotillav1.OverrideClusters{Names: []string{"us-1"}}
				r.Replicas = ptr.To[int32](7)
			}),
		}}},
		{Kind: "Override", Namespace: "shop", Name: "a", Spec: flotillav1.OverrideSpec{Rules: []flotillav1.OverrideRule{
			rule("labels", func(r *flotillav1.OverrideRule) { r.Labels = map[string]string{"tier": "edge", "app": ""} }),
		}}},
	}
	in := deployment()
	out, applied, err := Apply(in, ObjectSubject(in), eu, sources)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range applied {
		got = append(got, a.String())
	}
	want := "ClusterOverride z-registry rule mirror, Override shop/a rule labels, Override shop/b rule replicas, Override shop/b rule env"
	if strings.Join(got, ", ") != want {
		t.Errorf("applied %v, want %s", got, want)
	}
	containers, _, _ := unstructured.NestedSlice(out.Object, "spec", "template", "spec", "containers")
	web, sidecar := containers[0].(map[string]any), containers[1].(map[string]any)
	if web["image"] != "mirror.eu/nginx:1.27" || sidecar["image"] != "mirror.eu/envoy:v1" {
		t.Errorf("images %v, %v", web["image"], sidecar["image"])
	}
	if env := web["env"].([]any); len(env) != 2 || env[0].(map[string]any)["value"] != "eu" || env[1].(map[string]any)["name"] != "MIRROR" {
		t.Errorf("env %v", env)
	}
	if _, ok := sidecar["env"]; ok {
		t.Error("env changed a container the rule does not name")
	}
	if r, _, _ := unstructured.NestedInt64(out.Object, "spec", "replicas"); r != 2 {
		t.Errorf("replicas %d", r)
	}
	if l := out.GetLabels(); l["tier"] != "edge" || l["app"] != "" {
		t.Errorf("labels %v", l)
	}
	if cpu, _, _ := unstructured.NestedString(sidecar, "resources", "requests", "cpu"); cpu != "100m" {
		t.Errorf("resources %v", sidecar["resources"])
	}
	if img, _, _ := unstructured.NestedSlice(in.Object, "spec", "template", "spec", "containers"); img[0].(map[string]any)["image"] != "nginx:1.27" {
		t.Error("Apply changed its input")
	}
}

func TestARuleThatCannotApplyLeavesTheObjectAsItWas(t *testing.T) {
	for name, r := range map[string]flotillav1.OverrideRule{
		"a patch path that does not exist": rule("bad-path", func(r *flotillav1.OverrideRule) {
			r.JSONPatch = []flotillav1.JSONPatchOperation{{Op: "replace", Path: "/spec/nothing/here", Value: &apiextensionsv1.JSON{Raw: []byte(`1`)}}}
		}),
		"env added twice":   rule("twice", func(r *flotillav1.OverrideRule) { r.Env = []flotillav1.EnvOverride{{Op: "Add", Name: "REGION"}} }),
		"replicas of a pod": {Name: "pod", Targets: []flotillav1.OverrideTarget{{Kind: "Pod"}}, Replicas: ptr.To[int32](1)},
	} {
		in := deployment()
		subject := ObjectSubject(in)
		if r.Targets[0].Kind == "Pod" {
			in.SetAPIVersion("v1")
			in.SetKind("Pod")
			subject.Group, subject.Kind = "", "Pod"
		}
		sources := []Source{{Kind: "Override", Namespace: "shop", Name: "o", Spec: flotillav1.OverrideSpec{Rules: []flotillav1.OverrideRule{
			rule("first", func(r *flotillav1.OverrideRule) { r.Replicas = ptr.To[int32](1) }), r}}}}
		out, applied, err := Apply(in, subject, eu, sources)
		var f *Failure
		if !errors.As(err, &f) || f.Rule != r.Name || out != in || applied != nil {
			t.Errorf("%s: %v (applied %v): want a Failure of rule %s and the object as it was", name, err, applied, r.Name)
		}
	}
}

func TestPodSubjectFindsTheDeploymentThroughItsReplicaSet(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-7d9c-x", Labels: map[string]string{"pod-template-hash": "7d9c"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-7d9c", Controller: ptr.To(true)}}}}
	s := PodSubject(pod)
	for owner, want := range map[flotillav1.OwnerMatch]bool{{Kind: "Deployment", Name: "web"}: true, {Kind: "ReplicaSet", Name: "web-7d9c"}: true,
		{Kind: "Deployment", Name: "api"}: false} {
		ok, _ := targets(flotillav1.OverrideTarget{Kind: "Pod", Owner: &owner}, s)
		if ok != want {
			t.Errorf("owner %+v: %v, want %v", owner, ok, want)
		}
	}
	delegate := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	out, applied, err := ApplyPod(delegate, s, eu, []Source{{Kind: "Override", Namespace: "shop", Name: "o", Spec: flotillav1.OverrideSpec{Rules: []flotillav1.OverrideRule{{
		Targets: []flotillav1.OverrideTarget{{Kind: "Pod", Owner: &flotillav1.OwnerMatch{Kind: "Deployment", Name: "web"}}},
		Image:   &flotillav1.ImageOverride{Registry: "mirror.eu"}}}}}})
	if err != nil || len(applied) != 1 || out.Spec.Containers[0].Image != "mirror.eu/nginx" || delegate.Spec.Containers[0].Image != "nginx" {
		t.Errorf("ApplyPod: %v %v %v", err, applied, out.Spec.Containers)
	}
}

// A rule targets a custom kind by its group and kind: a ServiceMonitor of monitoring.coreos.com
// changes, one of another group of the same kind name does not, nor does a rule naming the kind
// without its group.
func TestApplyToACustomKindByItsGroup(t *testing.T) {
	monitor := func(apiVersion string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": "ServiceMonitor",
			"metadata": map[string]any{"name": "web", "namespace": "shop"}, "spec": map[string]any{"interval": "30s"}}}
	}
	src := []Source{{Kind: "Override", Namespace: "shop", Name: "scrape", Spec: flotillav1.OverrideSpec{Rules: []flotillav1.OverrideRule{{
		Name: "slower", Targets: []flotillav1.OverrideTarget{{Kind: "ServiceMonitor", APIGroup: "monitoring.coreos.com"}},
		JSONPatch: []flotillav1.JSONPatchOperation{{Op: "replace", Path: "/spec/interval", Value: &apiextensionsv1.JSON{Raw: []byte(`"2m"`)}}}}}}}}
	for apiVersion, want := range map[string]string{"monitoring.coreos.com/v1": "2m", "example.com/v1": "30s"} {
		u := monitor(apiVersion)
		got, _, err := Apply(u, ObjectSubject(u), eu, src)
		if err != nil {
			t.Fatal(err)
		}
		if interval, _, _ := unstructured.NestedString(got.Object, "spec", "interval"); interval != want {
			t.Errorf("%s: interval %s, want %s", apiVersion, interval, want)
		}
	}
}
