package replicator

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestSyncMetricsReportsEachReplicatorFromTheCache(t *testing.T) {
	s := runtime.NewScheme()
	if err := flotillav1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	synced := &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	synced.Status.Synced = flotillav1.SyncedTrue
	behind := &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: "db"}}
	behind.Status.Synced = flotillav1.SyncedFalse
	fresh := &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: "new"}} // not reconciled yet
	reader := fake.NewClientBuilder().WithScheme(s).WithObjects(synced, behind, fresh).Build()
	m := &SyncMetrics{Reader: reader, ctx: t.Context()}
	want := `
# HELP flotilla_replicator_synced 1 when the Replicator's last apply synced every target cluster (status.synced), else 0; one series per Replicator.
# TYPE flotilla_replicator_synced gauge
flotilla_replicator_synced{replicator="db"} 0
flotilla_replicator_synced{replicator="new"} 0
flotilla_replicator_synced{replicator="web"} 1
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if err := reader.Delete(t.Context(), behind); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m); n != 2 {
		t.Errorf("%d series after a deletion, want 2", n)
	}
}

func TestObserveApplyCountsAnErrorForAClusterNotSynced(t *testing.T) {
	const cluster = "observe-apply"
	before := testutil.ToFloat64(applyErrors.WithLabelValues(cluster))
	observeApply(placeResult{sync: flotillav1.ClusterSync{Name: cluster, Synced: true}}, 20*time.Millisecond)
	observeApply(placeResult{sync: flotillav1.ClusterSync{Name: cluster, Message: "refused"}}, 30*time.Millisecond)
	if got := testutil.ToFloat64(applyErrors.WithLabelValues(cluster)) - before; got != 1 {
		t.Errorf("%v errors counted, want 1", got)
	}
	if n := testutil.CollectAndCount(applyDuration, "flotilla_replicator_apply_duration_seconds"); n < 1 {
		t.Errorf("no apply duration series")
	}
}
