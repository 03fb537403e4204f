package replication

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/overrides"
)

func sample() *flotillav1.Replicator {
	three := int32(3)
	return &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "u1"}, Spec: flotillav1.ReplicatorSpec{
		ReplicationNamespace: "shop", DeploymentName: "nginx",
		DeploymentSpec: &flotillav1.ReplicatedDeploymentSpec{Replicas: &three, Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}}}}},
		ConfigMapName: "nginx", ConfigMapData: map[string]string{"a": "b"},
		ServiceName: "nginx", ServiceSpec: &corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		IngressName: "nginx", IngressSpec: &networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "b.example"}, {Host: "a.example"}, {Host: "b.example"}}},
		IngressSecureEnabled: true,
	}}
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func TestDesiredDerivesSelectorsAndMarksEveryObject(t *testing.T) {
	tls := map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k"), "ca.crt": []byte("ca")}
	in := Inputs{Replicator: sample(), PrimaryID: "p1", ServerTLS: tls, ClientTLS: map[string][]byte{"client.crt": []byte("x")}}
	for _, tc := range []struct {
		name       string
		at         Place
		wantClient bool
		wantSel    map[string]string
		wantReps   bool
	}{
		{"primary, fresh", Place{Cluster: flotillav1.RolloutPrimary, Primary: true}, true,
			map[string]string{flotillav1.LabelReplicator: "web", LabelDeployment: "nginx"}, true},
		{"secondary: no client key, primary label", Place{Cluster: "s1"}, false,
			map[string]string{flotillav1.LabelReplicator: "web", LabelDeployment: "nginx"}, true},
		{"plumber's live selector kept", Place{Cluster: "s1", LiveSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"apps": "nginx"}}}, false,
			map[string]string{"apps": "nginx"}, true},
		{"an HPA scales it: replicas left alone", Place{Cluster: "s1", HPA: true}, false,
			map[string]string{flotillav1.LabelReplicator: "web", LabelDeployment: "nginx"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Desired(in, tc.at)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				if o.GetNamespace() != "shop" || o.GetLabels()[flotillav1.LabelReplicator] != "web" || o.GetAnnotations()[flotillav1.AnnotationOwner] != "replicator/web" {
					t.Errorf("%s %s not marked: %v %v", o.GetKind(), o.GetName(), o.GetLabels(), o.GetAnnotations())
				}
				if _, has := o.GetLabels()[flotillav1.LabelPrimary]; has == tc.at.Primary {
					t.Errorf("%s: primary label present=%v in primary=%v", o.GetKind(), has, tc.at.Primary)
				}
			}
			if got := find(t, objs, "Secret", ClientSecretName) != nil; got != tc.wantClient {
				t.Errorf("cli-secret present = %v, want %v", got, tc.wantClient)
			}
			d := find(t, objs, "Deployment", "nginx")
			sel, _, _ := unstructured.NestedStringMap(d.Object, "spec", "selector", "matchLabels")
			tmpl, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
			svcSel, _, _ := unstructured.NestedStringMap(find(t, objs, "Service", "nginx").Object, "spec", "selector")
			for k, v := range tc.wantSel {
				if sel[k] != v || tmpl[k] != v || svcSel[k] != v {
					t.Errorf("selector %v, template %v, service %v; want %v", sel, tmpl, svcSel, tc.wantSel)
				}
			}
			if _, has, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "replicas"); has != tc.wantReps {
				t.Errorf("replicas applied = %v, want %v", has, tc.wantReps)
			}
			ing := find(t, objs, "Ingress", "nginx")
			hosts, _, _ := unstructured.NestedSlice(ing.Object, "spec", "tls")
			if len(hosts) != 1 || len(hosts[0].(map[string]any)["hosts"].([]any)) != 2 {
				t.Errorf("ingress tls %v, want one entry for both hosts", hosts)
			}
			if ing.GetAnnotations()["nginx.ingress.kubernetes.io/auth-tls-secret"] != "shop/ca-secret" {
				t.Errorf("ingress annotations %v", ing.GetAnnotations())
			}
		})
	}
}

func TestDesiredWithPlacementElectKeepsTheDeploymentInThePrimary(t *testing.T) {
	rep := sample()
	rep.Spec.Placement = flotillav1.PlacementElect
	in := Inputs{Replicator: rep, PrimaryID: "p1", ElectClusters: []string{"s1", "s2"}}
	primary, err := Desired(in, Place{Cluster: flotillav1.RolloutPrimary, Primary: true})
	if err != nil {
		t.Fatal(err)
	}
	d := find(t, primary, "Deployment", "nginx")
	ann, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "annotations")
	if _, ok := ann[flotillav1.AnnotationElect]; !ok || ann[flotillav1.AnnotationClusters] != "s1,s2" {
		t.Errorf("template annotations %v", ann)
	}
	secondary, err := Desired(in, Place{Cluster: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if find(t, secondary, "Deployment", "nginx") != nil || find(t, secondary, "ConfigMap", "nginx") == nil {
		t.Error("with placement Elect a secondary gets the ConfigMap but no Deployment")
	}
}

func TestLabelValueFitsLongNames(t *testing.T) {
	long := "a-replicator-name-that-is-much-longer-than-sixty-three-characters-for-sure"
	if v := flotillav1.ReplicatorLabelValue(long); len(v) > 63 || v == flotillav1.ReplicatorLabelValue(long+"x") {
		t.Errorf("flotillav1.ReplicatorLabelValue(%q) = %q", long, v)
	}
	if flotillav1.ReplicatorLabelValue("short") != "short" {
		t.Error("a short name is kept")
	}
}

func TestDesiredAppliesTheClustersOverridesToItsCopiesOnly(t *testing.T) {
	two := int32(2)
	in := Inputs{Replicator: sample(), PrimaryID: "p1", Overrides: []overrides.Source{{Kind: "Override", Namespace: "shop", Name: "edge",
		Spec: flotillav1.OverrideSpec{Rules: []flotillav1.OverrideRule{{Name: "small",
			Targets:  []flotillav1.OverrideTarget{{Kind: "Deployment", Names: []string{"nginx"}}},
			Clusters: flotillav1.OverrideClusters{Names: []string{"edge-1"}}, Replicas: &two,
			Env: []flotillav1.EnvOverride{{Op: "Add", Name: "REGION", Value: "edge"}}}}}}}}
	replicas := func(at Place) (int64, string) {
		objs, err := Desired(in, at)
		if err != nil {
			t.Fatal(err)
		}
		d := find(t, objs, "Deployment", "nginx")
		n, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
		return n, d.GetAnnotations()[flotillav1.AnnotationOverrides]
	}
	if n, ann := replicas(Place{Cluster: "edge-1", Overrides: overrides.Cluster{Name: "edge-1"}}); n != 2 || ann != "Override shop/edge rule small" {
		t.Errorf("edge-1: %d replicas, annotation %q", n, ann)
	}
	for _, at := range []Place{{Cluster: "big-1", Overrides: overrides.Cluster{Name: "big-1"}}, {Cluster: flotillav1.RolloutPrimary, Primary: true}} {
		if n, ann := replicas(at); n != 3 || ann != "" {
			t.Errorf("%s: %d replicas, annotation %q: the rule is edge-1's", at.Cluster, n, ann)
		}
	}
	in.Overrides[0].Spec.Rules[0].JSONPatch = []flotillav1.JSONPatchOperation{{Op: "remove", Path: "/spec/nothing"}}
	var failed *overrides.Failure
	if _, err := Desired(in, Place{Cluster: "edge-1", Overrides: overrides.Cluster{Name: "edge-1"}}); !errors.As(err, &failed) {
		t.Errorf("a rule that cannot apply: %v, want an overrides.Failure", err)
	}
}
