package virtualnode

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

func snapshot(status flotillav1.ClusterStatus) clusters.Snapshot {
	return clusters.Snapshot{
		Name: "eu", Role: clusters.RoleSecondary, ID: "id", Status: status, Reason: "ProbeFailed", Message: "timeout",
		Version: "v1.36.2", LastTransition: time.Unix(1000, 0), CapacitySynced: true,
		Capacity: clusters.Capacity{OS: "linux", Arch: "arm64", Region: "eu-west", Zone: "",
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("60")}},
	}
}

func TestDesiredNode(t *testing.T) {
	n := Desired(snapshot(flotillav1.ClusterRunning), NodeOptions{Address: "10.1.2.3", KubeletPort: 10250, PrimaryVersion: "v1.35.4"})
	if n.Name != "flotilla-eu" {
		t.Errorf("name = %s", n.Name)
	}
	for k, v := range map[string]string{"type": "virtual-kubelet", flotillav1.LabelCluster: "eu", flotillav1.LabelArch: "arm64",
		flotillav1.LabelRegion: "eu-west", "node-role.kubernetes.io/cluster": ""} {
		if got, ok := n.Labels[k]; !ok || got != v {
			t.Errorf("label %s = %q (%v), want %q", k, got, ok, v)
		}
	}
	for _, k := range []string{corev1.LabelOSStable, corev1.LabelArchStable, corev1.LabelTopologyZone, flotillav1.LabelZone} {
		if _, ok := n.Labels[k]; ok {
			t.Errorf("label %s must not be set", k)
		}
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != flotillav1.TaintVirtualNode || n.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("taints = %v", n.Spec.Taints)
	}
	if got := n.Status.Allocatable[corev1.ResourceCPU]; got.Cmp(resource.MustParse("60")) != 0 {
		t.Errorf("allocatable cpu = %s", got.String())
	}
	if n.Status.NodeInfo.KubeletVersion != "v1.35.0" || n.Status.NodeInfo.Architecture != "arm64" {
		t.Errorf("node info = %+v", n.Status.NodeInfo)
	}
	if n.Status.Addresses[0].Address != "10.1.2.3" || n.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Errorf("addresses %v, port %d", n.Status.Addresses, n.Status.DaemonEndpoints.KubeletEndpoint.Port)
	}
	// metrics-server scrapes the standard path at the node's own port.
	if _, ok := n.Annotations[AnnotationResourceMetricsPath]; ok {
		t.Errorf("annotations %v: no resource metrics path", n.Annotations)
	}
	if c := n.Status.Conditions[0]; c.Type != corev1.NodeReady || c.Status != corev1.ConditionTrue || c.LastTransitionTime.Unix() != 1000 {
		t.Errorf("ready = %+v", c)
	}
}

func TestUnknownSecondaryIsNotReadyWithTheReason(t *testing.T) {
	st := Status(snapshot(flotillav1.ClusterUnknown), NodeOptions{})
	ready := st.Conditions[0]
	if ready.Status != corev1.ConditionFalse || ready.Reason != flotillav1.ReasonSecondaryUnavailable {
		t.Fatalf("ready = %+v", ready)
	}
	for _, want := range []string{"eu", "ProbeFailed", "timeout"} {
		if !contains(ready.Message, want) {
			t.Errorf("message %q lacks %q", ready.Message, want)
		}
	}
}

func TestUnsyncedCapacityOffersNothing(t *testing.T) {
	s := snapshot(flotillav1.ClusterRunning)
	s.CapacitySynced = false
	st := Status(s, NodeOptions{})
	if pods := st.Allocatable[corev1.ResourcePods]; !pods.IsZero() {
		t.Errorf("pods = %s, want 0 before capacity is known", pods.String())
	}
}

func TestCapVersion(t *testing.T) {
	tests := []struct{ secondary, primary, want string }{
		{"v1.34.2", "v1.35.4", "v1.34.2"},
		{"v1.35.9", "v1.35.4", "v1.35.9"},
		{"v1.36.1", "v1.35.4", "v1.35.0"},
		{"v2.0.0", "v1.35.4", "v1.35.0"},
		{"v1.30.0+k3s1", "v1.35.4", "v1.30.0+k3s1"},
		{"", "v1.35.4", "v1.35.0"},
		{"v1.36.0", "", "v1.36.0"},
	}
	for _, tc := range tests {
		if got := CapVersion(tc.secondary, tc.primary); got != tc.want {
			t.Errorf("CapVersion(%q, %q) = %q, want %q", tc.secondary, tc.primary, got, tc.want)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestADetachedSecondaryIsCordonedNotFailedOver(t *testing.T) {
	detached := snapshot(flotillav1.ClusterUnknown)
	detached.Reason = flotillav1.ReasonNotRegistered
	n := Desired(detached, NodeOptions{})
	if !hasTaint(n.Spec.Taints, UnregisteredTaint()) {
		t.Errorf("taints %v: a detached secondary's node must be cordoned", n.Spec.Taints)
	}
	if hasTaint(Desired(snapshot(flotillav1.ClusterRunning), NodeOptions{}).Spec.Taints, UnregisteredTaint()) {
		t.Error("a registered secondary's node is cordoned")
	}
	long := time.Now().Add(-time.Hour)
	detached.LastTransition = long
	other := snapshot(flotillav1.ClusterRunning)
	other.Name = "other"
	third := snapshot(flotillav1.ClusterRunning)
	third.Name = "third"
	if got := Unreachable([]clusters.Snapshot{detached, other, third}, time.Now(), time.Minute); got[detached.Name] {
		t.Error("a detached secondary is tainted for failover: its proxies would be evicted while their delegates run")
	}
}

func TestARestartedManagerKeepsTheFailoverTaintUntilTheSecondaryAnswers(t *testing.T) {
	down := snapshot(flotillav1.ClusterUnknown)
	down.Reason = flotillav1.ReasonProbing // just registered again: not judged yet
	back := snapshot(flotillav1.ClusterRunning)
	back.Name = "back"
	tainted := map[string]bool{down.Name: true, "back": true}
	got := KeepTainted(map[string]bool{}, tainted, []clusters.Snapshot{down, back})
	if !got[down.Name] {
		t.Error("the taint of a secondary not yet heard from was lifted: failover postponed")
	}
	if got["back"] {
		t.Error("a secondary that answers keeps its failover taint")
	}
}

func TestTaintsForStampsTheFailoverTaintWhenAddedAndKeepsTheStamp(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	user := corev1.Taint{Key: "user", Effect: corev1.TaintEffectNoSchedule}
	added, changed := taintsFor([]corev1.Taint{user}, nil, true, t0)
	if !changed || len(added) != 2 || added[1].Key != flotillav1.TaintUnreachable || added[1].TimeAdded == nil || !added[1].TimeAdded.Time.Equal(t0) {
		t.Fatalf("taintsFor(unreachable) = %+v, %v; want the user's taint and the failover taint added at %s", added, changed, t0)
	}
	kept, changed := taintsFor(added, nil, true, t0.Add(time.Hour))
	if changed || !kept[1].TimeAdded.Time.Equal(t0) {
		t.Fatalf("taintsFor(still unreachable) = %+v, %v; want it unchanged, stamped %s", kept, changed, t0)
	}
	back, changed := taintsFor(kept, nil, false, t0.Add(2*time.Hour))
	if !changed || len(back) != 1 || back[0].Key != "user" {
		t.Fatalf("taintsFor(reachable) = %+v, %v; want the user's taint only", back, changed)
	}
}

// A return is written on the virtual node when its failover taint is lifted, and taken away when
// the node is tainted again: the rebalancer reads it, whichever replica leads.
func TestBackSinceIsStampedWhenTheFailoverTaintIsLifted(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	tainted := &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{FailoverTaint()}}}
	patch := map[string]*string{}
	backSince(patch, tainted, false, now)
	if v := patch[flotillav1.AnnotationBackSince]; v == nil || *v != "2026-11-28T12:00:00Z" {
		t.Fatalf("lifted: patch %v", patch)
	}
	patch = map[string]*string{}
	backSince(patch, tainted, true, now)
	if len(patch) != 0 {
		t.Errorf("still unreachable: patch %v", patch)
	}
	back := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{flotillav1.AnnotationBackSince: "2026-11-28T11:00:00Z"}}}
	patch = map[string]*string{}
	backSince(patch, back, false, now)
	if len(patch) != 0 {
		t.Errorf("back and reachable: patch %v, want none (the stamp stays)", patch)
	}
	patch = map[string]*string{}
	backSince(patch, back, true, now)
	if v, ok := patch[flotillav1.AnnotationBackSince]; !ok || v != nil {
		t.Errorf("unreachable again: patch %v, want the stamp removed", patch)
	}
}

// A secondary's devices (DRA) show on its virtual node per class: how many in capacity, how many
// free in allocatable; a class whose name is too long for a resource name is left out.
func TestDevicesShowPerClass(t *testing.T) {
	s := snapshot(flotillav1.ClusterRunning)
	long := "a-class-whose-name-is-far-too-long-for-the-name-part-of-a-resource.example.com"
	s.Capacity.DeviceCounts = []placement.DeviceClassCount{{Class: "gpu.example.com", Total: 4, Free: 3}, {Class: long, Total: 1, Free: 1}}
	st := Status(s, NodeOptions{})
	total, free := st.Capacity[flotillav1.DeviceResourcePrefix+"gpu.example.com"], st.Allocatable[flotillav1.DeviceResourcePrefix+"gpu.example.com"]
	if total.Value() != 4 || free.Value() != 3 {
		t.Errorf("gpu.example.com: %s of %s, want 3 of 4", free.String(), total.String())
	}
	if _, ok := st.Capacity[corev1.ResourceName(flotillav1.DeviceResourcePrefix+long)]; ok {
		t.Errorf("a class name too long for a resource name is shown: %v", st.Capacity)
	}
	if cpu := st.Capacity[corev1.ResourceCPU]; cpu.String() != "64" || len(s.Capacity.Capacity) != 1 {
		t.Errorf("the snapshot's capacity changed: %v", s.Capacity.Capacity)
	}
}
