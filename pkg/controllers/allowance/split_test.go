package allowance

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func pods(n string) corev1.ResourceList {
	if n == "" {
		return nil
	}
	return corev1.ResourceList{corev1.ResourcePods: resource.MustParse(n)}
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hard  string
		parts []Part
		want  []string
	}{
		{"one new namespace takes everything", "10", []Part{{Namespace: "a"}}, []string{"10"}},
		{"free room shared equally, the remainder to the first names", "10",
			[]Part{{Namespace: "b"}, {Namespace: "a"}, {Namespace: "c"}}, []string{"3", "4", "3"}},
		{"usage kept, the rest shared", "10",
			[]Part{{Namespace: "a", Spec: pods("5"), Counted: pods("5"), Used: pods("5")}, {Namespace: "b", Spec: pods("5"), Counted: pods("5"), Used: pods("1")}},
			// b is lowered to 1+2=3, but counts 5 until the quota controller syncs: a waits.
			[]string{"5", "3"}},
		{"then a gets the room b gave", "10",
			[]Part{{Namespace: "a", Spec: pods("5"), Counted: pods("5"), Used: pods("5")}, {Namespace: "b", Spec: pods("3"), Counted: pods("3"), Used: pods("1")}},
			[]string{"7", "3"}},
		{"a lowering not yet counted holds its room: nothing raised past hard", "10",
			[]Part{{Namespace: "a", Spec: pods("10"), Counted: pods("10"), Used: pods("2")}, {Namespace: "b"}},
			// a is lowered to 2+4=6 but still counts 10: b may not rise yet.
			[]string{"6", "0"}},
		{"once counted, the room is given", "10",
			[]Part{{Namespace: "a", Spec: pods("6"), Counted: pods("6"), Used: pods("2")}, {Namespace: "b", Spec: pods("0"), Counted: pods("0")}},
			[]string{"6", "4"}},
		{"usage over a lowered limit counts, and nothing is raised past hard", "4",
			[]Part{{Namespace: "a", Spec: pods("2"), Counted: pods("2"), Used: pods("6")}, {Namespace: "b", Spec: pods("0"), Counted: pods("0")}},
			[]string{"6", "0"}},
		{"the free room goes to the namespaces that want it, the others held to their use (lowered first)", "10",
			[]Part{{Namespace: "a", Spec: pods("5"), Counted: pods("5"), Used: pods("1")}, {Namespace: "b", Spec: pods("5"), Counted: pods("5"), Used: pods("5"), Wanting: true}},
			// a is lowered to 1 but counts 5 until synced: b may not rise yet.
			[]string{"1", "5"}},
		{"then the wanting one gets it all", "10",
			[]Part{{Namespace: "a", Spec: pods("1"), Counted: pods("1"), Used: pods("1")}, {Namespace: "b", Spec: pods("5"), Counted: pods("5"), Used: pods("5"), Wanting: true}},
			[]string{"1", "9"}},
		{"an allowance lowered under usage: limits at usage, none raised", "3",
			[]Part{{Namespace: "a", Spec: pods("5"), Counted: pods("5"), Used: pods("4")}, {Namespace: "b", Spec: pods("5"), Counted: pods("5"), Used: pods("1")}},
			[]string{"4", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Split(pods(tc.hard), tc.parts)
			for i, want := range tc.want {
				q := got[i][corev1.ResourcePods]
				if q.String() != want {
					t.Errorf("%s: %s, want %s", tc.parts[i].Namespace, q.String(), want)
				}
			}
			// What the API server may apply at once: the higher of each new spec and what it counts.
			var applied int64
			for i, p := range tc.parts {
				q := got[i][corev1.ResourcePods]
				c := p.Counted[corev1.ResourcePods]
				u := p.Used[corev1.ResourcePods]
				applied += max(q.Value(), c.Value(), u.Value())
			}
			// ... no more than hard, or than they added up to before when that was more.
			hard := pods(tc.hard)[corev1.ResourcePods]
			var before int64
			for _, p := range tc.parts {
				s, c, u := p.Spec[corev1.ResourcePods], p.Counted[corev1.ResourcePods], p.Used[corev1.ResourcePods]
				before += max(s.Value(), c.Value(), u.Value())
			}
			if applied > max(hard.Value(), before) {
				t.Errorf("limits that may apply add up to %d, past hard %s", applied, tc.hard)
			}
		})
	}
}

func TestSplitCPUInMilliAndExtendedResourcesAsRequests(t *testing.T) {
	hard := QuotaHard(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), "nvidia.com/gpu": resource.MustParse("3")})
	if _, ok := hard["requests.nvidia.com/gpu"]; !ok {
		t.Fatalf("an extended resource is limited as requests.<name>: %v", hard)
	}
	got := Split(hard, []Part{{Namespace: "a"}, {Namespace: "b"}, {Namespace: "c"}})
	for i, want := range []string{"334m", "333m", "333m"} {
		if q := got[i][corev1.ResourceCPU]; q.String() != want {
			t.Errorf("cpu %d: %s, want %s", i, q.String(), want)
		}
	}
	for i, want := range []string{"1", "1", "1"} {
		if q := got[i]["requests.nvidia.com/gpu"]; q.String() != want {
			t.Errorf("gpu %d: %s, want %s", i, q.String(), want)
		}
	}
}
