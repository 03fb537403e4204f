package translate

import (
	"reflect"
	"testing"
)

func TestStricterPodSecurity(t *testing.T) {
	const (
		enforce = "pod-security.kubernetes.io/enforce"
		version = "pod-security.kubernetes.io/enforce-version"
		warn    = "pod-security.kubernetes.io/warn"
	)
	tests := map[string]struct {
		existing, wanted, want map[string]string
	}{
		"a new namespace gets the primary's": {nil, map[string]string{enforce: "baseline", version: "v1.30"},
			map[string]string{enforce: "baseline", version: "v1.30"}},
		"an admin's stricter level stays": {map[string]string{enforce: "restricted", "team": "a"}, map[string]string{enforce: "baseline", version: "v1.30"},
			map[string]string{enforce: "restricted"}},
		"the primary tightened: carried": {map[string]string{enforce: "baseline", version: "v1.29"}, map[string]string{enforce: "restricted", version: "latest"},
			map[string]string{enforce: "restricted", version: "latest"}},
		"never loosened to privileged": {map[string]string{enforce: "baseline"}, map[string]string{enforce: "privileged"},
			map[string]string{enforce: "baseline"}},
		"an unparsable level counts as restricted: only restricted replaces it": {map[string]string{enforce: "tight"}, map[string]string{enforce: "restricted"},
			map[string]string{enforce: "restricted"}},
		"each mode on its own": {map[string]string{warn: "restricted"}, map[string]string{enforce: "baseline"},
			map[string]string{enforce: "baseline", warn: "restricted"}},
		"an unparsable level is not loosened to baseline": {map[string]string{enforce: "tight"}, map[string]string{enforce: "baseline"},
			map[string]string{enforce: "tight"}},
		"an admin's level the primary does not set stays": {map[string]string{enforce: "baseline"}, nil, map[string]string{enforce: "baseline"}},
	}
	for name, tc := range tests {
		if got := StricterPodSecurity(tc.existing, tc.wanted); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", name, got, tc.want)
		}
	}
}
