package webhook

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func manifest(t *testing.T, apiVersion, kind, name string) flotillav1.Manifest {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}})
	if err != nil {
		t.Fatal(err)
	}
	var m flotillav1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func writes(group, resource, ns string) []Right {
	var out []Right
	for _, v := range []string{"create", "patch", "delete"} {
		out = append(out, Right{Verb: v, Group: group, Resource: resource, Namespace: ns})
	}
	return out
}

func TestReplicatorRights(t *testing.T) {
	deploy := &flotillav1.ReplicatedDeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}}
	cases := []struct {
		name    string
		spec    flotillav1.ReplicatorSpec
		exists  bool
		want    []Right
		wantErr string
	}{{
		name:   "nothing to write in an existing namespace needs no right",
		spec:   flotillav1.ReplicatorSpec{ReplicationNamespace: "x"},
		exists: true,
	}, {
		name: "a missing namespace must be creatable by the author",
		spec: flotillav1.ReplicatorSpec{ReplicationNamespace: "x"},
		want: []Right{{Verb: "create", Resource: "namespaces", Name: "x"}},
	}, {
		name: "plumber's fields: ConfigMap, Deployment, Service, Ingress, in that order",
		spec: flotillav1.ReplicatorSpec{ReplicationNamespace: "x", ConfigMapName: "c", DeploymentName: "d", DeploymentSpec: deploy,
			ServiceName: "s", IngressName: "i", IngressSpec: &networkingv1.IngressSpec{}},
		exists: true,
		want: concat(writes("", "configmaps", "x"), writes("apps", "deployments", "x"), writes("", "services", "x"),
			writes("networking.k8s.io", "ingresses", "x")),
	}, {
		name:   "a deploymentName without a spec writes no Deployment",
		spec:   flotillav1.ReplicatorSpec{ReplicationNamespace: "x", DeploymentName: "d"},
		exists: true,
	}, {
		name: "TLS writes Secrets; an issuerRef Certificates; a ClusterIssuer must be usable by the author",
		spec: flotillav1.ReplicatorSpec{ReplicationNamespace: "x", IngressSecureEnabled: true,
			TLS: &flotillav1.ReplicatorTLS{IssuerRef: &flotillav1.IssuerRef{Name: "public", Kind: "ClusterIssuer", Group: "cert-manager.io"}}},
		exists: true,
		want: concat(writes("", "secrets", "x"), writes("cert-manager.io", "certificates", "x"),
			[]Right{{Verb: "use", Group: "cert-manager.io", Resource: "signers", Name: "clusterissuers.cert-manager.io/public"}}),
	}, {
		name: "a namespaced Issuer needs no signer right (it is the namespace's own)",
		spec: flotillav1.ReplicatorSpec{ReplicationNamespace: "x", IngressSecureEnabled: true,
			TLS: &flotillav1.ReplicatorTLS{IssuerRef: &flotillav1.IssuerRef{Name: "own", Kind: "Issuer"}}},
		exists: true,
		want:   concat(writes("", "secrets", "x"), writes("cert-manager.io", "certificates", "x")),
	}, {
		name: "resources: each kind once, its group from the kind; a missing namespace first",
		spec: flotillav1.ReplicatorSpec{ReplicationNamespace: "y", Resources: []flotillav1.Manifest{
			manifest(t, "apps/v1", "DaemonSet", "a"), manifest(t, "v1", "ServiceAccount", "b"), manifest(t, "apps/v1", "DaemonSet", "c"),
			manifest(t, "batch/v1", "CronJob", "d"), manifest(t, "policy/v1", "PodDisruptionBudget", "e"),
			manifest(t, "autoscaling/v2", "HorizontalPodAutoscaler", "f"), manifest(t, "networking.k8s.io/v1", "NetworkPolicy", "g")}},
		want: concat([]Right{{Verb: "create", Resource: "namespaces", Name: "y"}}, writes("apps", "daemonsets", "y"),
			writes("", "serviceaccounts", "y"), writes("batch", "cronjobs", "y"), writes("policy", "poddisruptionbudgets", "y"),
			writes("autoscaling", "horizontalpodautoscalers", "y"), writes("networking.k8s.io", "networkpolicies", "y")),
	}, {
		name: "a custom kind: the resource the primary serves it as; a special kind's name in another group is that group's kind",
		spec: flotillav1.ReplicatorSpec{ReplicationNamespace: "x", Resources: []flotillav1.Manifest{
			manifest(t, "example.com/v1", "Widget", "w"), manifest(t, "example.com/v1", "Secret", "s"), manifest(t, "cert-manager.io/v1", "Certificate", "c")}},
		exists: true,
		want:   concat(writes("example.com", "widgets", "x"), writes("example.com", "lookalikes", "x"), writes("cert-manager.io", "certificates", "x")),
	}, {
		name:    "a kind the primary does not serve is refused, naming it",
		spec:    flotillav1.ReplicatorSpec{ReplicationNamespace: "x", Resources: []flotillav1.Manifest{manifest(t, "evil.example/v1", "Secret", "s")}},
		wantErr: `resources[0]: kind Secret (evil.example/v1) is not served by the primary`,
	}, {
		name:    "a cluster-scoped kind is refused",
		spec:    flotillav1.ReplicatorSpec{ReplicationNamespace: "x", Resources: []flotillav1.Manifest{manifest(t, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "s")}},
		wantErr: `resources[0]: kind ClusterRoleBinding (rbac.authorization.k8s.io/v1) is cluster-scoped`,
	}, {
		name:    "Flotilla's own kinds are refused",
		spec:    flotillav1.ReplicatorSpec{ReplicationNamespace: "x", Resources: []flotillav1.Manifest{manifest(t, "flotilla.dev/v1alpha1", "Override", "o")}},
		wantErr: `resources[0]: a Replicator does not carry Flotilla's own kinds`,
	}}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.AddSpecific(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"},
		schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, schema.GroupVersionResource{}, meta.RESTScopeNamespace)
	mapper.AddSpecific(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Secret"},
		schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "lookalikes"}, schema.GroupVersionResource{}, meta.RESTScopeNamespace)
	mapper.AddSpecific(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"},
		schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}, schema.GroupVersionResource{}, meta.RESTScopeRoot)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReplicatorRights(&tc.spec, tc.exists, mapper)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("rights =\n%v\nwant\n%v", got, tc.want)
			}
		})
	}
}

func concat(lists ...[]Right) []Right {
	var out []Right
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func TestDenialMessageNamesVerbResourceAndNamespace(t *testing.T) {
	missing := concat(writes("apps", "deployments", "argocd"), writes("", "configmaps", "argocd"))
	got := DenialMessage("r", "alice", missing)
	for _, want := range []string{`Replicator r: user "alice" may not create deployments.apps in namespace argocd`,
		"nor patch deployments.apps in namespace argocd", "(and 3 more)"} {
		if !strings.Contains(got, want) {
			t.Errorf("message %q lacks %q", got, want)
		}
	}
	if got := (Right{Verb: "create", Resource: "namespaces", Name: "x"}).String(); got != "create namespaces x" {
		t.Errorf("cluster-scoped right reads %q", got)
	}
}

func TestConfigurationChecksReplicatorsFailClosed(t *testing.T) {
	cfg := Configuration(ConfigOptions{URL: "https://127.0.0.1:9443"})
	var found bool
	for _, w := range cfg.Webhooks {
		if w.Name != "replicators.flotilla.dev" {
			continue
		}
		found = true
		if *w.FailurePolicy != "Fail" || *w.ClientConfig.URL != "https://127.0.0.1:9443"+ReplicatorPath {
			t.Errorf("failurePolicy %s, url %s", *w.FailurePolicy, *w.ClientConfig.URL)
		}
		ops := w.Rules[0].Operations
		if len(ops) != 2 || ops[0] != "CREATE" || ops[1] != "UPDATE" || w.Rules[0].Resources[0] != "replicators" {
			t.Errorf("rules %+v", w.Rules)
		}
		if len(w.MatchConditions) != 1 || !strings.Contains(w.MatchConditions[0].Expression, "object.spec != oldObject.spec") {
			t.Errorf("match conditions %+v", w.MatchConditions)
		}
	}
	if !found {
		t.Fatal("no Replicator webhook in the configuration")
	}
}
