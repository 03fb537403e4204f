package clusterset

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

func TestSetStatus(t *testing.T) {
	all := []placement.ClusterView{
		{Name: "eu-1", Labels: map[string]string{flotillav1.LabelCluster: "eu-1", flotillav1.LabelRegion: "eu"}},
		{Name: "eu-2", Labels: map[string]string{flotillav1.LabelCluster: "eu-2", flotillav1.LabelRegion: "eu"}},
		{Name: "us-1", Labels: map[string]string{flotillav1.LabelCluster: "us-1", flotillav1.LabelRegion: "us"}},
	}
	europe := &metav1.LabelSelector{MatchLabels: map[string]string{flotillav1.LabelRegion: "eu"}}
	for _, tc := range []struct {
		name    string
		spec    flotillav1.ClusterSetSpec
		members []string
		reason  string
		message string
	}{
		{"by selector", flotillav1.ClusterSetSpec{Selector: europe}, []string{"eu-1", "eu-2"}, flotillav1.ReasonResolved, "2 cluster(s) in the set"},
		{"by name and selector", flotillav1.ClusterSetSpec{Clusters: []string{"us-1"}, Selector: europe}, []string{"eu-1", "eu-2", "us-1"}, flotillav1.ReasonResolved, "3 cluster(s) in the set"},
		{"a name not registered", flotillav1.ClusterSetSpec{Clusters: []string{"us-1", "mars", "atlantis"}}, []string{"us-1"}, flotillav1.ReasonUnknownClusters,
			"1 cluster(s) in the set; not registered (or not a usable secondary): atlantis, mars"},
		{"a selector that does not parse", flotillav1.ClusterSetSpec{Clusters: []string{"us-1"}, Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: flotillav1.LabelRegion, Operator: "Near"}}}}, []string{"us-1"}, flotillav1.ReasonSelectorInvalid, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := &flotillav1.ClusterSet{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: 3}, Spec: tc.spec}
			setStatus(set, all)
			c := meta.FindStatusCondition(set.Status.Conditions, flotillav1.ConditionResolved)
			if len(set.Status.Clusters) != len(tc.members) || set.Status.ObservedGeneration != 3 || c == nil || c.Reason != tc.reason ||
				(tc.message != "" && c.Message != tc.message) {
				t.Fatalf("status %+v, want members %v, reason %s %q", set.Status, tc.members, tc.reason, tc.message)
			}
			for i := range tc.members {
				if set.Status.Clusters[i] != tc.members[i] {
					t.Errorf("members %v, want %v", set.Status.Clusters, tc.members)
				}
			}
		})
	}
}
