package quota

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// Each quota's limits and usage, from its status, under the names its spec gives them.
func TestMetricsAreTheQuotasStatus(t *testing.T) {
	q := quotaOf(corev1.ResourceList{corev1.ResourcePods: resource.MustParse("20"), "requests.cpu": resource.MustParse("4")})
	q.Status = flotillav1.FleetQuotaStatus{Waiting: 3, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("20"), "requests.cpu": resource.MustParse("1500m")}}
	other := &flotillav1.FleetQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "empty", Name: "none"}}
	m := &Metrics{Reader: fake.NewClientBuilder().WithScheme(clusters.NewScheme()).WithObjects(q, other).Build(), ctx: t.Context()}
	want := `
# HELP flotilla_fleetquota_hard A FleetQuota's overall limit of one resource (spec.hard), as its name there says it.
# TYPE flotilla_fleetquota_hard gauge
flotilla_fleetquota_hard{namespace="team",quota="fleet",resource="pods"} 20
flotilla_fleetquota_hard{namespace="team",quota="fleet",resource="requests.cpu"} 4
# HELP flotilla_fleetquota_used What the namespace's elected pods past the quota gate request of one resource a FleetQuota limits (status.used).
# TYPE flotilla_fleetquota_used gauge
flotilla_fleetquota_used{namespace="team",quota="fleet",resource="pods"} 20
flotilla_fleetquota_used{namespace="team",quota="fleet",resource="requests.cpu"} 1.5
# HELP flotilla_fleetquota_waiting_pods Elected pods waiting for room in a FleetQuota (status.waiting).
# TYPE flotilla_fleetquota_waiting_pods gauge
flotilla_fleetquota_waiting_pods{namespace="empty",quota="none"} 0
flotilla_fleetquota_waiting_pods{namespace="team",quota="fleet"} 3
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(&Metrics{Reader: m.Reader}); n != 0 {
		t.Errorf("before Start: %d series", n)
	}
}
