package replication

import (
	"encoding/json"
	"testing"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// An Ingress a Replicator writes carries no snippet annotation (raw ingress controller
// configuration) into any cluster, a secondary above all, where the primary's admission rules
// about them do not run: ingress-nginx's configuration-, server-, auth- and stream-snippet, and
// any other key that ends in -snippet, -snippets or /snippet. Its other annotations stay, and so
// does a snippet-named annotation of another kind, which no ingress controller reads.
func TestDesiredIngressCarriesNoSnippetAnnotation(t *testing.T) {
	snippets := []string{
		"nginx.ingress.kubernetes.io/configuration-snippet",
		"nginx.ingress.kubernetes.io/server-snippet",
		"nginx.ingress.kubernetes.io/auth-snippet",
		"nginx.ingress.kubernetes.io/stream-snippet",
		"example.com/location-snippets",
		"example.com/snippet",
	}
	kept := map[string]string{
		"nginx.ingress.kubernetes.io/rewrite-target": "/",
		"nginx.ingress.kubernetes.io/ssl-redirect":   "false",
		"example.com/snippet-count":                  "2",
		"team":                                       "shop",
	}
	annotations := map[string]string{}
	for k, v := range kept {
		annotations[k] = v
	}
	for _, k := range snippets {
		annotations[k] = "location /admin { allow all; }"
	}
	manifest := func(apiVersion, kind string) map[string]any {
		return map[string]any{"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"name": "extra", "annotations": annotations}}
	}
	raw, err := json.Marshal([]map[string]any{
		manifest("networking.k8s.io/v1", "Ingress"),
		manifest("v1", "ConfigMap"),
	})
	if err != nil {
		t.Fatal(err)
	}
	rep := sample()
	if err := json.Unmarshal(raw, &rep.Spec.Resources); err != nil {
		t.Fatal(err)
	}
	tls := map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k"), "ca.crt": []byte("ca")}
	in := Inputs{Replicator: rep, PrimaryID: "p1", ServerTLS: tls}
	for _, at := range []Place{{Cluster: "s1"}, {Cluster: flotillav1.RolloutPrimary, Primary: true}} {
		objs, err := Desired(in, at)
		if err != nil {
			t.Fatal(err)
		}
		ing := find(t, objs, "Ingress", "extra")
		if ing == nil {
			t.Fatalf("%s: the Ingress of the resources is not desired", at.Cluster)
		}
		got := ing.GetAnnotations()
		for _, k := range snippets {
			if _, has := got[k]; has {
				t.Errorf("%s: the Ingress carries the snippet annotation %s", at.Cluster, k)
			}
		}
		for k, v := range kept {
			if got[k] != v {
				t.Errorf("%s: the Ingress's annotation %s = %q, want %q", at.Cluster, k, got[k], v)
			}
		}
		if got[flotillav1.AnnotationOwner] != "replicator/web" || len(got) != len(kept)+1 {
			t.Errorf("%s: the Ingress's annotations are %v, want the kept ones and the owner's", at.Cluster, got)
		}
		if own := find(t, objs, "Ingress", "nginx").GetAnnotations(); own["nginx.ingress.kubernetes.io/auth-tls-verify-client"] != "on" {
			t.Errorf("%s: the Replicator's own Ingress lost its annotations: %v", at.Cluster, own)
		}
		if cm := find(t, objs, "ConfigMap", "extra").GetAnnotations(); cm["nginx.ingress.kubernetes.io/server-snippet"] == "" {
			t.Errorf("%s: a ConfigMap lost an annotation no ingress controller reads: %v", at.Cluster, cm)
		}
	}
}
