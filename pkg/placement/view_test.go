package placement_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
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
