package placement_test

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/placement/placementtest"
)

func TestUnreachableForReadsTheFailoverTaintsStamp(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 10, 0, 0, time.UTC)
	stamped := corev1.Taint{Key: flotillav1.TaintUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: now.Add(-10 * time.Minute)}}
	unstamped := corev1.Taint{Key: flotillav1.TaintUnreachable, Effect: corev1.TaintEffectNoExecute}
	other := corev1.Taint{Key: "other", Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: now.Add(-time.Hour)}}
	for _, tc := range []struct {
		taints []corev1.Taint
		want   time.Duration
	}{
		{nil, 0}, {[]corev1.Taint{other}, 0}, {[]corev1.Taint{unstamped}, 0}, {[]corev1.Taint{other, stamped}, 10 * time.Minute},
	} {
		if got := placement.UnreachableFor(tc.taints, now); got != tc.want {
			t.Errorf("placement.UnreachableFor(%v) = %s, want %s", tc.taints, got, tc.want)
		}
	}
}

// Without node detail (flotillactl's view), a cluster that passes the cluster-level checks fits:
// the same judgement, its node-level part left to the secondary.
func TestNodesUnknownJudgesTheClusterOnly(t *testing.T) {
	vnode := func(name string) placement.ClusterView {
		return placement.ClusterView{Name: name, Ready: true, Labels: map[string]string{flotillav1.LabelCluster: name}, NodesUnknown: true}
	}
	away := vnode("asia")
	away.Ready, away.Reason = false, "its virtual node is not Ready"
	tainted := vnode("mars")
	tainted.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	pod := placementtest.Elected(placementtest.CPU("64"), func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} })
	feasible, why, err := placement.Refit(t.Context(), pod, []placement.ClusterView{vnode("eu"), away, tainted, placementtest.TwoClusters()[1]})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(feasible, []string{"eu"}) {
		t.Errorf("feasible %v, want [eu]: asia is away, mars tainted, us has node detail and no ssd node (why: %s)", feasible, why)
	}
}

func TestDataHeldIn(t *testing.T) {
	claims := map[string]string{"demo/a": "eu", "demo/b": "us", "other/a": "eu"}
	pod := placementtest.Elected(placementtest.WithClaims("a", "b"))
	if got := placement.DataHeldIn(pod, claims, "eu"); !slices.Equal(got, []string{"a"}) {
		t.Errorf("held in eu: %v, want [a]", got)
	}
	if got := placement.DataHeldIn(pod, claims, "asia"); len(got) != 0 {
		t.Errorf("held in asia: %v, want none", got)
	}
	recreate := placementtest.Elected(placementtest.WithClaims("a"),
		placementtest.Annotate(flotillav1.AnnotationOnVolumeClusterLoss, flotillav1.OnVolumeClusterLossRecreate))
	if got := placement.DataHeldIn(recreate, claims, "eu"); len(got) != 0 {
		t.Errorf("a pod that chose recreate is held by nothing: %v", got)
	}
}
