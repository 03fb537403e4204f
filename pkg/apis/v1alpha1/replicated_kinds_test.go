package v1alpha1

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Each kind's coordinates are the API server's: a typo here would make the webhook check a right
// on a resource that does not exist and the controller write through an unknown API.
func TestReplicatedKindsNameRealAPIs(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range ReplicatedKinds {
		t.Run(k.Kind, func(t *testing.T) {
			if seen[k.Kind] {
				t.Fatal("listed twice")
			}
			seen[k.Kind] = true
			if got, ok := ReplicatedKindOf(k.Kind); !ok || got.GroupVersionKind() != k.GroupVersionKind() {
				t.Errorf("ReplicatedKindOf(%s) = %+v, %v", k.Kind, got, ok)
			}
			gvk := k.GroupVersionKind()
			if plural, _ := meta.UnsafeGuessKindToResource(gvk); plural.Resource != k.Resource {
				t.Errorf("resource %q, want %q", k.Resource, plural.Resource)
			}
			if !k.Namespaced {
				t.Error("not namespaced: a Replicator writes into its replication namespace only")
			}
			if k.Group == "cert-manager.io" {
				return // not a built-in API
			}
			if !clientgoscheme.Scheme.Recognizes(gvk) {
				t.Errorf("%s is no built-in API", gvk)
			}
		})
	}
	if _, ok := ReplicatedKindOf("Pod"); ok {
		t.Error("ReplicatedKindOf finds a kind the table does not list")
	}
}

// Flotilla never reads a Secret of a secondary: a Secret is written blind, and not watched there.
func TestSecretsAreNeverReadInSecondaries(t *testing.T) {
	for _, k := range ReplicatedKinds {
		if k.Kind == "Secret" && (!k.WriteOnly || k.Watched) {
			t.Errorf("Secret: %+v", k)
		}
		if k.WriteOnly && k.Watched {
			t.Errorf("%s is watched but never read", k.Kind)
		}
	}
}
