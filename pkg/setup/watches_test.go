package setup

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/flotilla-dev/flotilla/pkg/access"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// Every kind the manager follows in a secondary is in the registry's scheme, and a secondary
// grants the primary what an informer of it needs.
func TestSecondaryWatchesAreKnownAndGranted(t *testing.T) {
	scheme := clusters.NewScheme()
	watches, err := SecondaryWatches(scheme)
	if err != nil {
		t.Fatal(err)
	}
	if len(watches) < 8 {
		t.Fatalf("the table has %d watches: delegates, claims, five of Multi-Cluster Services and the Replicators' drift at least", len(watches))
	}
	rules := access.Rules("primary-id")
	granted := func(group, resource, verb string) bool {
		for _, r := range rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
	for _, w := range watches {
		gvks, _, err := scheme.ObjectKinds(w.Object)
		if err != nil || len(gvks) == 0 {
			t.Errorf("watch %q: %T is not in the registry's scheme: %v", w.Name, w.Object, err)
			continue
		}
		gvr, _ := meta.UnsafeGuessKindToResource(gvks[0])
		for _, verb := range []string{"list", "watch"} {
			if !granted(gvr.Group, gvr.Resource, verb) {
				t.Errorf("watch %q: a secondary does not grant %s on %s", w.Name, verb, gvr.GroupResource())
			}
		}
	}
}
