package replicator

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// A manager that has just started knows no cluster until the registration Secret is applied: a
// Replicator deleted then keeps its finalizer (its copies in the secondaries are still to be
// removed), and nothing is written.
func TestNothingIsConcludedBeforeTheRegistrationSecret(t *testing.T) {
	now := metav1.NewTime(time.Now())
	rep := &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: "web", DeletionTimestamp: &now, Finalizers: []string{flotillav1.FinalizerReplicator}},
		Spec:   flotillav1.ReplicatorSpec{ReplicationNamespace: "shop", TargetCluster: []string{"east"}},
		Status: flotillav1.ReplicatorStatus{Clusters: []flotillav1.ClusterSync{{Name: "east", Synced: true}}}}
	c := fake.NewClientBuilder().WithScheme(clusters.NewScheme()).WithObjects(rep).WithStatusSubresource(rep).Build()
	r := &Reconciler{Client: c, Registry: clusters.NewRegistry(clusters.Options{PrimaryID: "p"}, logr.Discard())}
	got, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "web"}})
	if err != nil || got.RequeueAfter != clusters.ConfiguredRecheck {
		t.Fatalf("Reconcile before the registration Secret = %+v, %v; want a wait", got, err)
	}
	var after flotillav1.Replicator
	if err := c.Get(t.Context(), client.ObjectKey{Name: "web"}, &after); err != nil {
		t.Fatalf("the Replicator went: %v", err)
	}
	if len(after.Finalizers) != 1 {
		t.Errorf("finalizers %v: removed while its copies in east were never removed", after.Finalizers)
	}
}
