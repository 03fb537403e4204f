package placement

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestAdmitToQuotas(t *testing.T) {
	pod := func(cpu string, clusters ...string) QuotaRequest {
		return QuotaRequest{Requests: list("pods", "1", "cpu", cpu), Clusters: clusters}
	}
	for _, tc := range []struct {
		name     string
		quotas   []QuotaView
		used     QuotaUsage
		waiting  []QuotaRequest
		admitted []string // per waiting pod: "" waits, "*" admitted with its clusters, else the cluster
		why      []string // a substring of why each waiting one waits
		total    string   // pods counted after
	}{
		{name: "room for two of three pods",
			quotas:  []QuotaView{{Name: "team", Hard: list("pods", "3")}},
			used:    QuotaUsage{Total: list("pods", "1")},
			waiting: []QuotaRequest{pod("1", "a"), pod("1", "a"), pod("1", "a")}, admitted: []string{"*", "*", ""},
			why: []string{"", "", "FleetQuota team: pods 3/3 used, the pod asks for 1"}, total: "3"},
		{name: "cpu binds first, and a smaller pod behind a large one still starts",
			quotas:  []QuotaView{{Name: "team", Hard: list("pods", "10", "cpu", "2")}},
			waiting: []QuotaRequest{pod("1500m", "a"), pod("1", "a"), pod("500m", "a")}, admitted: []string{"*", "", "*"},
			why: []string{"", "FleetQuota team: cpu 1500m/2 used, the pod asks for 1", ""}, total: "2"},
		{name: "every quota must have room",
			quotas:  []QuotaView{{Name: "big", Hard: list("pods", "10")}, {Name: "small", Hard: list("cpu", "1")}},
			waiting: []QuotaRequest{pod("2", "a")}, admitted: []string{""}, why: []string{"FleetQuota small: cpu 0/1 used, the pod asks for 2"}, total: "0"},
		{name: "a resource the quota does not name is not limited",
			quotas:  []QuotaView{{Name: "gpus", Hard: list("nvidia.com/gpu", "0")}},
			waiting: []QuotaRequest{pod("64", "a")}, admitted: []string{"*"}, total: "1"},
		{name: "per cluster: the overflow goes to the other cluster, then waits",
			quotas:  []QuotaView{{Name: "team", Hard: list("pods", "10"), Clusters: map[string]corev1.ResourceList{"a": list("pods", "1"), "b": list("pods", "1")}}},
			used:    QuotaUsage{Total: list("pods", "1"), PerCluster: map[string]corev1.ResourceList{"a": list("pods", "1")}},
			waiting: []QuotaRequest{pod("1", "a", "b"), pod("1", "a", "b")}, admitted: []string{"b", ""},
			why: []string{"", "FleetQuota team in a: pods 1/1 used, the pod asks for 1; FleetQuota team in b: pods 1/1 used"}, total: "2"},
		{name: "per cluster: a cluster the quota does not limit takes the pod, the fewest pods first",
			quotas:  []QuotaView{{Name: "team", Clusters: map[string]corev1.ResourceList{"a": list("pods", "5")}}},
			used:    QuotaUsage{PerCluster: map[string]corev1.ResourceList{"a": list("pods", "1"), "b": list("pods", "3")}},
			waiting: []QuotaRequest{pod("1", "a", "b"), pod("1", "b")}, admitted: []string{"a", "b"}, total: "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			verdicts, after := AdmitToQuotas(tc.quotas, tc.used, tc.waiting)
			for i, v := range verdicts {
				want := tc.admitted[i]
				switch {
				case want == "" && v.Admit, want != "" && !v.Admit:
					t.Errorf("pod %d: %+v, want admitted %q", i, v, want)
				case want != "" && want != "*" && v.Cluster != want, want == "*" && v.Cluster != "":
					t.Errorf("pod %d admitted to %q, want %q", i, v.Cluster, want)
				}
				if tc.why != nil && !strings.Contains(v.Why, tc.why[i]) {
					t.Errorf("pod %d waits because %q, want %q", i, v.Why, tc.why[i])
				}
			}
			if pods := after.Total[corev1.ResourcePods]; pods.String() != tc.total && (tc.total != "0" || !pods.IsZero()) {
				t.Errorf("pods counted after: %s, want %s", pods.String(), tc.total)
			}
			if u := tc.used.Total[corev1.ResourcePods]; tc.used.Total != nil && u.String() != "1" {
				t.Errorf("the usage given changed: %v", tc.used.Total)
			}
		})
	}
}

func TestQuotaNamesAndRequests(t *testing.T) {
	limits := QuotaLimits(list("requests.cpu", "4", "requests.memory", "8Gi", "pods", "10", "requests.nvidia.com/gpu", "2"))
	for _, name := range []corev1.ResourceName{"cpu", "memory", "pods", "nvidia.com/gpu"} {
		if _, ok := limits[name]; !ok {
			t.Errorf("%s not among %v", name, limits)
		}
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: list("cpu", "2")}}},
		Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: list("cpu", "500m", "nvidia.com/gpu", "1")}},
			{Resources: corev1.ResourceRequirements{Requests: list("cpu", "500m")}}}}}
	req := QuotaRequests(pod)
	if cpu, gpu, pods := req[corev1.ResourceCPU], req["nvidia.com/gpu"], req[corev1.ResourcePods]; cpu.String() != "2" || gpu.String() != "1" || pods.String() != "1" {
		t.Errorf("requests %v: the init container's 2 cpu, one gpu and one pod", req)
	}
}
