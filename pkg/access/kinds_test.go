package access

import (
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// effective is what rules grant: "verb group/resource" (resource/name for a named rule), sorted.
func effective(rules []rbacv1.PolicyRule) []string {
	seen := map[string]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if len(r.ResourceNames) == 0 {
						seen[v+" "+g+"/"+res] = true
					}
					for _, n := range r.ResourceNames {
						seen[v+" "+g+"/"+res+"/"+n] = true
					}
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// grants says whether rules grant verb on group/resource (any name).
func grants(rules []rbacv1.PolicyRule, verb, group, resource string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) && len(r.ResourceNames) == 0 {
			return true
		}
	}
	return false
}

// A primary's rights in a secondary, whatever the layout of its rules: a change here changes what
// every joined secondary grants.
func TestRulesGrantExactly(t *testing.T) {
	verbs := func(vs string, resources ...string) []string {
		var out []string
		for _, v := range strings.Fields(vs) {
			for _, r := range resources {
				out = append(out, v+" "+r)
			}
		}
		return out
	}
	informed, written := "get list watch create update patch delete", "get create update patch delete"
	var want []string
	for _, l := range [][]string{
		verbs("get list watch", "/nodes"), verbs(informed, "/pods"), verbs("list", "/events"), verbs("get", "/pods/log"),
		verbs("update patch", "/pods/ephemeralcontainers", "/pods/resize"), verbs("create", "/pods/exec", "/pods/attach", "/pods/portforward"),
		verbs("get list watch create update patch delete", "/namespaces"), verbs(informed, "/configmaps", "/services"),
		verbs("create update patch delete", "/secrets"), verbs("list "+written, "/serviceaccounts"), verbs("get list watch create patch delete", "/persistentvolumeclaims"),
		verbs(written, "networking.k8s.io/networkpolicies"), verbs(informed, "networking.k8s.io/ingresses"), verbs("list", "metrics.k8s.io/pods"),
		verbs(informed, "apps/deployments"), verbs("list "+written, "apps/statefulsets", "apps/daemonsets", "batch/jobs", "batch/cronjobs"),
		verbs(written, "policy/poddisruptionbudgets"), verbs("list "+written, "autoscaling/horizontalpodautoscalers"),
		verbs("list watch create update patch delete", "discovery.k8s.io/endpointslices"),
		verbs("get list watch", "multicluster.x-k8s.io/serviceexports"), verbs("update patch", "multicluster.x-k8s.io/serviceexports/status"),
		verbs("get create update", "about.k8s.io/clusterproperties"),
		verbs(informed, "multicluster.x-k8s.io/serviceimports"), verbs("update patch", "multicluster.x-k8s.io/serviceimports/status"), verbs("get", "networking.k8s.io/ingressclasses"),
		verbs("get list watch create", "flotilla.dev/flotillaprimaries"), verbs("update patch delete", "flotilla.dev/flotillaprimaries/abc"),
		verbs("get", "flotilla.dev/primaryallowances/abc"),
		verbs("get list watch", "resource.k8s.io/deviceclasses", "resource.k8s.io/resourceslices"),
		verbs(informed, "resource.k8s.io/resourceclaims"), verbs(written, "resource.k8s.io/resourceclaimtemplates"),
	} {
		want = append(want, l...)
	}
	sort.Strings(want)
	if got := effective(Rules("abc")); !reflect.DeepEqual(got, want) {
		t.Errorf("rules grant\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Every kind of the two tables gets in a secondary what Flotilla does with it there: written
// (applied, created, deleted), read unless it is write-only (Secrets), and listed and watched when
// a Replicator's drift is watched.
func TestRulesGrantWhatTheKindTablesNeed(t *testing.T) {
	rules := Rules("abc")
	need := func(kind, group, resource string, verbs ...string) {
		t.Helper()
		for _, v := range verbs {
			if !grants(rules, v, group, resource) {
				t.Errorf("%s: no %s on %s.%s", kind, v, resource, group)
			}
		}
	}
	for _, k := range flotillav1.ReplicatedKinds {
		if k.PrimaryOnly {
			continue
		}
		need(k.Kind, k.Group, k.Resource, "create", "patch", "delete")
		if !k.WriteOnly {
			need(k.Kind, k.Group, k.Resource, "get")
		}
		if k.Watched {
			need(k.Kind, k.Group, k.Resource, "list", "watch")
		}
	}
	for _, k := range translate.DependencyKinds {
		need(k.Kind, k.Resource.Group, k.Resource.Resource, "create", "patch", "delete")
		if !k.WriteOnly {
			need(k.Kind, k.Resource.Group, k.Resource.Resource, "get")
		}
	}
}

// What a table says is never read in a secondary (Secrets) is granted no read, whatever the other
// table says of the same resource.
func TestWriteOnlyKindsAreNeverRead(t *testing.T) {
	rules := Rules("abc")
	var writeOnly []string
	for _, k := range flotillav1.ReplicatedKinds {
		if k.WriteOnly {
			writeOnly = append(writeOnly, k.Group+"/"+k.Resource)
		}
	}
	for _, k := range translate.DependencyKinds {
		if k.WriteOnly {
			writeOnly = append(writeOnly, k.Resource.Group+"/"+k.Resource.Resource)
		}
	}
	if len(writeOnly) == 0 {
		t.Fatal("no write-only kind: Secrets are")
	}
	for _, gr := range writeOnly {
		group, resource, _ := strings.Cut(gr, "/")
		for _, v := range []string{"get", "list", "watch"} {
			if grants(rules, v, group, resource) {
				t.Errorf("%s granted on %s, which is never read", v, gr)
			}
		}
	}
}
