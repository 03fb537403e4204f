package placement_test

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/placement/placementtest"
)

func TestTenancyOffersOnlyTheBoundSets(t *testing.T) {
	three := append(append([]placement.ClusterView(nil), twoClusters...), placementtest.ClusterOf("asia", true, "4", nil))
	sets := []placement.ClusterSetView{
		{Name: "europe", Clusters: []string{"eu"}},
		{Name: "americas", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{flotillav1.LabelRegion: "region-us"}}},
	}
	denied := func(views []placement.ClusterView) []string {
		var out []string
		for _, v := range views {
			if v.Denied != "" {
				out = append(out, v.Name)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		t      placement.Tenancy
		denied []string
		why    string
	}{
		{"bound to no set: every cluster", placement.Tenancy{Namespace: "a", Sets: sets}, nil, ""},
		{"bound to no set, deny by default: none", placement.Tenancy{Namespace: "a", Sets: sets, DefaultDeny: true}, []string{"eu", "us", "asia"}, "bound to no ClusterSet"},
		{"one set by name", placement.Tenancy{Namespace: "a", Bound: []string{"europe"}, Sets: sets}, []string{"us", "asia"}, "not in the ClusterSets bound to namespace a (europe)"},
		{"two sets, one by selector", placement.Tenancy{Namespace: "b", Bound: []string{"europe", "americas"}, Sets: sets}, []string{"asia"}, "(americas, europe)"},
		{"a set that does not exist", placement.Tenancy{Namespace: "c", Bound: []string{"mars"}, Sets: sets}, []string{"eu", "us", "asia"}, "ClusterSet mars does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.t.Deny(three)
			if d := denied(got); !slices.Equal(d, tc.denied) {
				t.Errorf("denied %v, want %v", d, tc.denied)
			}
			for _, v := range got {
				if v.Denied != "" && !strings.Contains(v.Denied, tc.why) {
					t.Errorf("%s denied because %q, want it to say %q", v.Name, v.Denied, tc.why)
				}
			}
		})
	}
	// A pod that names a cluster outside its sets waits gated, the reason naming the set.
	pod := placementtest.Elected(placementtest.Annotate(flotillav1.AnnotationClusters, "us"))
	d, err := placement.Decide(t.Context(), pod, placement.DelegateConstraints(pod), placement.Tenancy{Namespace: "a", Bound: []string{"europe"}, Sets: sets}.Deny(three), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Gated || !strings.Contains(d.Why, "us: not in the ClusterSets bound to namespace a (europe)") {
		t.Errorf("decision %+v: want it gated, saying why", d)
	}
}
