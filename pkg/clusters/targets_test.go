package clusters

import "testing"

// Names resolve to the registered secondaries by cluster, context or plumber's raw name; those
// the namespace may not use (its cluster sets) are refused by name, and left out of ["*"].
func TestResolveTargetNames(t *testing.T) {
	snaps := []Snapshot{
		{Name: "primary", Role: RolePrimary, ID: "p", Entry: Entry{Context: "primary", Cluster: "kind-p", User: "admin"}},
		{Name: "eu", Role: RoleSecondary, ID: "e", Entry: Entry{Context: "gke_proj_eu", Cluster: "v1262-cluster", User: "kubernetes-admin2"}},
		{Name: "us", Role: RoleSecondary, ID: "u", Entry: Entry{Context: "us", Cluster: "v1252-cluster", User: "kubernetes-admin3"}},
	}
	denied := map[string]string{"us": "not in the ClusterSets bound to namespace shop (europe)"}
	for _, tc := range []struct {
		name      string
		names     []string
		want      []string
		wantIssue string
	}{
		{"empty: primary only", nil, nil, ""},
		{"cluster, context and plumber's raw names", []string{"eu", "v1252-cluster.kubernetes-admin3"}, []string{"eu"}, "us: not in the ClusterSets bound to namespace shop (europe)"},
		{"context name", []string{"gke_proj_eu"}, []string{"eu"}, ""},
		{"the primary adds no secondary", []string{"primary"}, nil, ""},
		{"unknown named", []string{"atlantis", "eu"}, []string{"eu"}, "unknown cluster(s) atlantis"},
		{"a denied cluster named", []string{"eu", "us"}, []string{"eu"}, "us: not in the ClusterSets bound to namespace shop (europe)"},
		{"star: every secondary the namespace may use", []string{"*"}, []string{"eu"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Resolve(tc.names, snaps).Deny(denied)
			if len(res.Clusters) != len(tc.want) {
				t.Fatalf("clusters %v, want %v", res.Clusters, tc.want)
			}
			for i := range tc.want {
				if res.Clusters[i] != tc.want[i] {
					t.Errorf("clusters %v, want %v", res.Clusters, tc.want)
				}
			}
			if res.Problem() != tc.wantIssue {
				t.Errorf("problem %q, want %q", res.Problem(), tc.wantIssue)
			}
		})
	}
}

// ["*"] with nothing denied is every usable secondary.
func TestResolveEveryTarget(t *testing.T) {
	snaps := []Snapshot{{Name: "eu", Role: RoleSecondary, ID: "e"}, {Name: "us", Role: RoleSecondary, ID: "u"}, {Name: "p", Role: RolePrimary}}
	res := Resolve([]string{"*"}, snaps).Deny(nil)
	if len(res.Clusters) != 2 || res.Clusters[0] != "eu" || res.Clusters[1] != "us" || res.Problem() != "" {
		t.Errorf("* resolved to %+v", res)
	}
}
