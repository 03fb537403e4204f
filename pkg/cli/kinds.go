package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// parseKinds reads join's --kinds (RESOURCE.GROUP, or a core RESOURCE) and checks --crds goes
// with custom kinds: each once, sorted, Flotilla's own kinds and definitions themselves refused.
func parseKinds(kinds []string, crds bool) ([]schema.GroupResource, error) {
	var out []schema.GroupResource
	custom := false
	for _, k := range kinds {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		gr := schema.ParseGroupResource(k)
		if errs := validation.IsDNS1123Label(gr.Resource); len(errs) > 0 {
			return nil, fmt.Errorf("--kinds: %q: the resource %q is not a resource name (plural, lower case: widgets.example.com): %s", k, gr.Resource, strings.Join(errs, "; "))
		}
		if gr.Group != "" {
			if errs := validation.IsDNS1123Subdomain(gr.Group); len(errs) > 0 {
				return nil, fmt.Errorf("--kinds: %q: the group %q is not an API group: %s", k, gr.Group, strings.Join(errs, "; "))
			}
			custom = true
		}
		switch {
		case flotillav1.FlotillaGroup(gr.Group):
			return nil, fmt.Errorf("--kinds: %q: Flotilla's own kinds are not a Replicator's to write", k)
		case gr == (schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}):
			return nil, fmt.Errorf("--kinds: %q: definitions are allowed by --crds, for the kinds listed only", k)
		}
		if !slices.Contains(out, gr) {
			out = append(out, gr)
		}
	}
	if crds && !custom {
		return nil, errors.New("--crds goes with --kinds naming custom kinds (RESOURCE.GROUP): it lets the primary write their definitions only")
	}
	slices.SortFunc(out, func(a, b schema.GroupResource) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}
