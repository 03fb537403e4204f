package virtualnode

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestDecideStatusPushHoldsCapacityOnATimerAndWritesReadinessAtOnce(t *testing.T) {
	base := Desired(snapshot(flotillav1.ClusterRunning), NodeOptions{})
	withAllocatable := func(cpu string) *corev1.Node {
		n := base.DeepCopy()
		n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse(cpu)
		return n
	}
	notReady := Desired(snapshot(flotillav1.ClusterUnknown), NodeOptions{})
	relabelled := base.DeepCopy()
	relabelled.Labels["topology.kubernetes.io/region"] = "eu-north"
	interval := 10 * time.Second
	tests := map[string]struct {
		want  *corev1.Node
		since time.Duration
		out   statusPush
	}{
		"nothing changed":                          {want: base, since: time.Second},
		"capacity within 1 %":                      {want: withAllocatable("60.5"), since: time.Second},
		"capacity moved, interval over: now":       {want: withAllocatable("50"), since: 11 * time.Second, out: statusPush{capacity: true}},
		"capacity moved within the interval: held": {want: withAllocatable("50"), since: 3 * time.Second, out: statusPush{hold: 7 * time.Second}},
		"readiness changed: at once":               {want: notReady, since: time.Second, out: statusPush{ready: true, capacity: changedCapacity(base, notReady)}},
		"labels changed: at once":                  {want: relabelled, since: time.Second, out: statusPush{ready: true}},
	}
	for name, tc := range tests {
		if got := decideStatusPush(base, tc.want, tc.since, interval); got != tc.out {
			t.Errorf("%s: %+v, want %+v", name, got, tc.out)
		}
	}
}

// changedCapacity is what decideStatusPush must say of capacity when readiness changes too.
func changedCapacity(a, b *corev1.Node) bool {
	return decideStatusPush(a, b, time.Hour, time.Second).capacity
}
