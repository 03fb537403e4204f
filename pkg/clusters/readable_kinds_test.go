package clusters_test

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/flotilla-dev/flotilla/pkg/access"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// Before a Replicator deletes a namespace it created in a secondary, it lists every kind
// clusters.ReadableKinds names there: each must be listable.
func TestRulesListWhatANamespaceDeletionReads(t *testing.T) {
	rules := access.Rules("abc")
	for _, l := range clusters.ReadableKinds() {
		gvks, _, err := clientgoscheme.Scheme.ObjectKinds(l)
		if err != nil {
			t.Fatal(err)
		}
		gvk := gvks[0]
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
		gvr, _ := meta.UnsafeGuessKindToResource(gvk)
		listed := slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, gvr.Group) && slices.Contains(r.Resources, gvr.Resource) && slices.Contains(r.Verbs, "list")
		})
		if !listed {
			t.Errorf("no list on %s", gvr.GroupResource())
		}
	}
}
