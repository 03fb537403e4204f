package clusters

import (
	"strings"
	"testing"
)

func TestClusterName(t *testing.T) {
	tests := map[string]struct {
		context    string
		want       string // exact, when the context is kept as it is
		wantPrefix string // when it is sanitised
	}{
		"valid name is kept":        {context: "secondary1", want: "secondary1"},
		"GKE context":               {context: "gke_my-project_europe-west1-b_prod", wantPrefix: "gke-my-project-europe-west1-b-prod-"},
		"EKS ARN":                   {context: "arn:aws:eks:us-east-1:123456789012:cluster/prod", wantPrefix: "arn-aws-eks-us-east-1-123456789012-cluster-prod-"},
		"kubeadm default":           {context: "kubernetes-admin@kubernetes", wantPrefix: "kubernetes-admin-kubernetes-"},
		"upper case":                {context: "Prod", wantPrefix: "prod-"},
		"only symbols":              {context: "@@@", wantPrefix: "cluster-"},
		"leading and trailing dots": {context: ".a.", wantPrefix: "a-"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := ClusterName(tc.context)
			if !ValidClusterName(got) {
				t.Fatalf("ClusterName(%q) = %q, not a valid cluster name", tc.context, got)
			}
			if tc.want != "" && got != tc.want {
				t.Errorf("ClusterName(%q) = %q, want %q", tc.context, got, tc.want)
			}
			if tc.wantPrefix != "" && !strings.HasPrefix(got, tc.wantPrefix) {
				t.Errorf("ClusterName(%q) = %q, want prefix %q", tc.context, got, tc.wantPrefix)
			}
			if again := ClusterName(tc.context); again != got {
				t.Errorf("not stable: %q then %q", got, again)
			}
		})
	}
}

func TestClusterNamesOfDistinctContextsDiffer(t *testing.T) {
	contexts := []string{
		"kubernetes-admin@kubernetes", "kubernetes-admin@kubernetes-2", "kubernetes_admin@kubernetes",
		"gke_p_z_n", "gke-p-z-n", "GKE_P_Z_N",
		strings.Repeat("a", 80) + "x", strings.Repeat("a", 80) + "y",
	}
	seen := map[string]string{}
	for _, c := range contexts {
		n := ClusterName(c)
		if prev, ok := seen[n]; ok {
			t.Errorf("contexts %q and %q both named %q", prev, c, n)
		}
		seen[n] = c
		if len(n) > MaxClusterNameLength {
			t.Errorf("ClusterName(%q) = %q is longer than %d", c, n, MaxClusterNameLength)
		}
	}
}
