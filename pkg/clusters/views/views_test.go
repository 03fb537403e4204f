package views

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

type snapshots []clusters.Snapshot

func (s snapshots) Snapshots() []clusters.Snapshot { return s }

func secondary(name string, edit func(*clusters.Snapshot)) clusters.Snapshot {
	s := clusters.Snapshot{Name: name, Role: clusters.RoleSecondary, ID: "uid-" + name, Status: flotillav1.ClusterRunning, CapacitySynced: true,
		Capacity: clusters.Capacity{Nodes: []clusters.NodeCapacity{{Name: name + "-n0",
			Free: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}}
	if edit != nil {
		edit(&s)
	}
	return s
}

func TestFromSnapshotsKeepsTheUsableSecondaries(t *testing.T) {
	views := FromSnapshots([]clusters.Snapshot{
		secondary("eu", nil),
		secondary("us", func(s *clusters.Snapshot) { s.Status, s.Reason = flotillav1.ClusterUnknown, "ProbeFailed" }),
		secondary("new", func(s *clusters.Snapshot) { s.CapacitySynced = false }),
		secondary("none", func(s *clusters.Snapshot) { s.StorageClass = clusters.StorageClassNone }),
		secondary("unknown", func(s *clusters.Snapshot) { s.ID = "" }),
		{Name: "primary", Role: clusters.RolePrimary, ID: "p"},
	})
	if len(views) != 4 {
		t.Fatalf("views %+v, want eu, us, new and none", views)
	}
	eu, us, fresh, none := views[0], views[1], views[2], views[3]
	if !eu.Ready || eu.Labels[flotillav1.LabelCluster] != "eu" || len(eu.Nodes) != 1 || eu.Nodes[0].Free.Cpu().String() != "2" {
		t.Errorf("eu %+v", eu)
	}
	if us.Ready || us.Reason != "ProbeFailed" {
		t.Errorf("us, away: %+v", us)
	}
	if fresh.Ready || fresh.Reason != "capacity not known yet" {
		t.Errorf("a cluster whose capacity is not synced: %+v", fresh)
	}
	if !none.NoClaims || eu.NoClaims {
		t.Errorf("storage class none takes no claims: %+v, %+v", none, eu)
	}
}

func TestGathererReadsTheVirtualNodes(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 10, 0, 0, time.UTC)
	node := func(name string, edit func(*corev1.Node)) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: flotillav1.VirtualNodeName(name), Annotations: map[string]string{}}}
		edit(n)
		return n
	}
	reader := fake.NewClientBuilder().WithObjects(
		node("eu", func(n *corev1.Node) { n.Spec.Unschedulable = true }),
		node("us", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: flotillav1.TaintUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: now.Add(-time.Minute)}}}
			n.Annotations[flotillav1.AnnotationDraining] = ""
		}),
	).Build()
	g := &Gatherer{Registry: snapshots{secondary("eu", nil), secondary("us", nil), secondary("asia", nil)}, VirtualNodes: reader,
		Clock: clocktesting.NewFakePassiveClock(now)}
	views, err := g.Views(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(views) != 3 || !views[0].Cordoned || views[0].FailoverTainted {
		t.Errorf("eu, cordoned: %+v", views[0])
	}
	if us := views[1]; !us.FailoverTainted || us.UnreachableFor != time.Minute || !us.Draining || us.Cordoned {
		t.Errorf("us, failover-tainted a minute ago and draining: %+v", us)
	}
	if asia := views[2]; asia.Cordoned || asia.FailoverTainted || asia.Draining || len(asia.Taints) != 0 {
		t.Errorf("asia, no virtual node yet: %+v", asia)
	}
	v, ok, err := g.View(t.Context(), "us")
	if err != nil || !ok || !v.Draining {
		t.Errorf("View(us) = %+v, %v, %v", v, ok, err)
	}
	if _, ok, err := g.View(t.Context(), "mars"); ok || err != nil {
		t.Errorf("View(mars) = %v, %v: want not found", ok, err)
	}
}

func TestForNamespaceDeniesWhatItsSetsDoNotHold(t *testing.T) {
	scheme := clusters.NewScheme()
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&flotillav1.ClusterSet{ObjectMeta: metav1.ObjectMeta{Name: "europe"}, Spec: flotillav1.ClusterSetSpec{Clusters: []string{"eu"}}},
		&flotillav1.ClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "europe"}, Spec: flotillav1.ClusterSetBindingSpec{ClusterSet: "europe"}},
	).Build()
	g := &Gatherer{Registry: snapshots{secondary("eu", nil), secondary("us", nil)}, Tenancy: reader}
	views, err := g.ForNamespace(t.Context(), "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if views[0].Denied != "" || !strings.Contains(views[1].Denied, "not in the ClusterSets bound to namespace team-a (europe)") {
		t.Errorf("team-a: eu %q, us %q", views[0].Denied, views[1].Denied)
	}
	other, err := g.ForNamespace(t.Context(), "team-b")
	if err != nil || other[0].Denied != "" || other[1].Denied != "" {
		t.Errorf("an unbound namespace uses every cluster: %+v, %v", other, err)
	}
	g.DefaultDeny = true
	other, err = g.ForNamespace(t.Context(), "team-b")
	if err != nil || other[0].Denied == "" || other[1].Denied == "" {
		t.Errorf("an unbound namespace uses none when the fleet denies by default: %+v, %v", other, err)
	}
}

// Denied lists the clusters a namespace may not use, with why.
func TestDeniedNamesWhatTheNamespaceMayNotUse(t *testing.T) {
	reader := fake.NewClientBuilder().WithScheme(clusters.NewScheme()).WithObjects(
		&flotillav1.ClusterSet{ObjectMeta: metav1.ObjectMeta{Name: "europe"}, Spec: flotillav1.ClusterSetSpec{Clusters: []string{"eu"}}},
		&flotillav1.ClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "europe"}, Spec: flotillav1.ClusterSetBindingSpec{ClusterSet: "europe"}},
	).Build()
	g := &Gatherer{Registry: snapshots{secondary("eu", nil), secondary("us", nil)}, Tenancy: reader}
	denied, err := g.Denied(t.Context(), "team-a")
	if err != nil || len(denied) != 1 || !strings.Contains(denied["us"], "namespace team-a (europe)") {
		t.Errorf("team-a: %v, %v", denied, err)
	}
	if denied, err = g.Denied(t.Context(), "free"); err != nil || len(denied) != 0 {
		t.Errorf("an unbound namespace: %v, %v", denied, err)
	}
}
