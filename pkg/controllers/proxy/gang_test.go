package proxy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

// A gang's state: members Flotilla's gate holds wait, those another gate (Kueue's admission) still
// holds are counted apart, a member that went names the gang's cluster, and finished or deleted
// members and other gangs' pods are not counted.
func TestGangMembersOfCountsWhatHoldsEachMember(t *testing.T) {
	member := func(name, gang string, gates ...string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			flotillav1.AnnotationGang: gang, flotillav1.AnnotationGangSize: "4"}}}
		for _, g := range gates {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
		}
		return p
	}
	went := member("went", "train")
	went.Annotations[flotillav1.AnnotationGangCluster] = "eu"
	done := member("done", "train", flotillav1.SchedulingGatePlacement)
	done.Status.Phase = corev1.PodSucceeded
	pods := []corev1.Pod{
		member("a", "train", flotillav1.SchedulingGatePlacement),
		member("b", "train", flotillav1.SchedulingGatePlacement, "kueue.x-k8s.io/admission"),
		member("c", "train", flotillav1.SchedulingGatePlacement, flotillav1.SchedulingGateQuota),
		went, done,
		member("other", "infer", flotillav1.SchedulingGatePlacement, "kueue.x-k8s.io/admission"),
	}
	s := gangMembersOf(pods, placement.Gang{Name: "train"})
	if s.count != 4 || s.held != 1 || s.gone != "eu" || len(s.waiting) != 3 {
		t.Fatalf("count %d, held %d, gone %q, waiting %d: want 4, 1 (Kueue's gate; Flotilla's quota gate is its own), eu, 3", s.count, s.held, s.gone, len(s.waiting))
	}
}

// A member that comes after its gang went joins it there, unless that cluster is away: then it
// waits for the others to be failed over, and the gang starts whole elsewhere.
func TestALateMemberJoinsItsGangOnlyInAClusterThatIsThere(t *testing.T) {
	views := []placement.ClusterView{{Name: "up", Ready: true}, {Name: "down"}, {Name: "failing", Ready: true, FailoverTainted: true}}
	for cluster, joins := range map[string]bool{"up": true, "down": false, "failing": false} {
		why := cannotJoin("train", cluster, views)
		if (why == "") != joins {
			t.Errorf("%s: why %q, want joins=%v", cluster, why, joins)
		}
	}
}
