package access

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// verbOrder is the order a rule lists its verbs in.
var verbOrder = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// kindNeed is what Flotilla does in a secondary with one resource of the kind tables, and why.
type kindNeed struct {
	resource schema.GroupResource
	verbs    map[string]bool
	why      []string
}

// kindGrants are the rules the kinds of the two tables need in a secondary, one per resource, in
// the tables' order: what a Replicator writes there (v1alpha1.ReplicatedKinds: applied and pruned,
// read unless write-only, listed and watched when its drift is), and the copies of what elected
// pods use (translate.DependencyKinds: written, read unless write-only). A kind added to a table
// is granted here with it.
func kindGrants() []Grant {
	var needs []*kindNeed
	need := func(gr schema.GroupResource, why string, verbs ...string) {
		i := slices.IndexFunc(needs, func(n *kindNeed) bool { return n.resource == gr })
		if i < 0 {
			needs = append(needs, &kindNeed{resource: gr, verbs: map[string]bool{}})
			i = len(needs) - 1
		}
		for _, v := range verbs {
			needs[i].verbs[v] = true
		}
		needs[i].why = append(needs[i].why, why)
	}
	for _, k := range flotillav1.ReplicatedKinds {
		if k.PrimaryOnly {
			continue
		}
		verbs, why := writes(k.WriteOnly), "a Replicator's "+k.Kind+" objects (applied, pruned"
		if k.Watched {
			verbs, why = append(verbs, "list", "watch"), why+"; drift watch: informer, label-selected"
		}
		need(k.GroupResource(), why+writeOnlyNote(k.WriteOnly)+")", verbs...)
	}
	for _, k := range translate.DependencyKinds {
		why := "copies of the " + k.Kind + " objects elected pods use (applied, kept in sync, removed unused"
		if !k.Synced() {
			why = "the " + k.Kind + " a delegate runs as (created; an existing one is read to tell whether it is Flotilla's"
		}
		need(k.Resource.GroupResource(), why+writeOnlyNote(k.WriteOnly)+")", writes(k.WriteOnly)...)
	}
	out := make([]Grant, 0, len(needs))
	for _, n := range needs {
		var verbs []string
		for _, v := range verbOrder {
			if n.verbs[v] {
				verbs = append(verbs, v)
			}
		}
		out = append(out, Grant{rbacv1.PolicyRule{APIGroups: []string{n.resource.Group}, Resources: []string{n.resource.Resource}, Verbs: verbs},
			strings.Join(n.why, "; ")})
	}
	return out
}

// writes are the verbs of what Flotilla writes in a secondary: applied (create, patch), replaced
// when immutable (delete), deleted; read too unless it is write-only (Secrets are never read there).
func writes(writeOnly bool) []string {
	if writeOnly {
		return []string{"create", "update", "patch", "delete"}
	}
	return []string{"get", "create", "update", "patch", "delete"}
}

func writeOnlyNote(writeOnly bool) string {
	if writeOnly {
		return "; written, never read"
	}
	return ""
}
