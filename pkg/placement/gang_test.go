package placement_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha1 "k8s.io/api/scheduling/v1alpha1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

func TestGangOf(t *testing.T) {
	cases := []struct {
		name        string
		labels, ann map[string]string
		workload    *corev1.WorkloadReference
		want        placement.Gang
		ok          bool
		err         string
	}{
		{name: "no gang"},
		{name: "Flotilla's annotations", ann: map[string]string{flotillav1.AnnotationGang: "train", flotillav1.AnnotationGangSize: "4"},
			want: placement.Gang{Name: "train", Size: 4}, ok: true},
		{name: "Kueue's pod group", labels: map[string]string{flotillav1.LabelKueuePodGroup: "g"}, ann: map[string]string{flotillav1.AnnotationKueuePodGroupTotal: "3"},
			want: placement.Gang{Name: "g", Size: 3}, ok: true},
		{name: "a size that does not parse", ann: map[string]string{flotillav1.AnnotationGang: "train", flotillav1.AnnotationGangSize: "four"},
			err: "needs flotilla.dev/gang-size, a count of its members from 1 to 1000"},
		{name: "no size", labels: map[string]string{flotillav1.LabelKueuePodGroup: "g"}, err: "needs kueue.x-k8s.io/pod-group-total-count"},
		{name: "the Workload API's pod group: its size is the Workload's", workload: &corev1.WorkloadReference{Name: "job", PodGroup: "workers"},
			want: placement.Gang{Name: "job/workers", Workload: &corev1.WorkloadReference{Name: "job", PodGroup: "workers"}}, ok: true},
		{name: "a replicated pod group: one gang per replica key", workload: &corev1.WorkloadReference{Name: "job", PodGroup: "workers", PodGroupReplicaKey: "r1"},
			want: placement.Gang{Name: "job/workers/r1", Workload: &corev1.WorkloadReference{Name: "job", PodGroup: "workers", PodGroupReplicaKey: "r1"}}, ok: true},
		{name: "Flotilla's annotations over a workload reference", ann: map[string]string{flotillav1.AnnotationGang: "train", flotillav1.AnnotationGangSize: "4"},
			workload: &corev1.WorkloadReference{Name: "job", PodGroup: "workers"}, want: placement.Gang{Name: "train", Size: 4}, ok: true},
		{name: "a PodGroup: its size is the PodGroup's", ann: map[string]string{flotillav1.AnnotationPodGroup: "trainers"},
			want: placement.Gang{Name: "trainers", PodGroup: "trainers"}, ok: true},
		{name: "Flotilla's annotations over a PodGroup", ann: map[string]string{flotillav1.AnnotationGang: "train", flotillav1.AnnotationGangSize: "4",
			flotillav1.AnnotationPodGroup: "trainers"}, want: placement.Gang{Name: "train", Size: 4}, ok: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := placement.GangOf(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels, Annotations: tc.ann},
				Spec: corev1.PodSpec{WorkloadRef: tc.workload}})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("GangOf = %+v, %v, %v; want %+v, %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
}

// A gang that names the Workload API's pod group is only known once its Workload is read: its size
// is the group's gang minCount, a basic group's pods are no gang, and what is missing is said.
func TestWorkloadGang(t *testing.T) {
	ref := &corev1.WorkloadReference{Name: "job", PodGroup: "workers"}
	workload := func(groups ...schedulingv1alpha1.PodGroup) *schedulingv1alpha1.Workload {
		return &schedulingv1alpha1.Workload{Spec: schedulingv1alpha1.WorkloadSpec{PodGroups: groups}}
	}
	gang := func(name string, min int32) schedulingv1alpha1.PodGroup {
		return schedulingv1alpha1.PodGroup{Name: name, Policy: schedulingv1alpha1.PodGroupPolicy{Gang: &schedulingv1alpha1.GangSchedulingPolicy{MinCount: min}}}
	}
	basic := schedulingv1alpha1.PodGroup{Name: "workers", Policy: schedulingv1alpha1.PodGroupPolicy{Basic: &schedulingv1alpha1.BasicSchedulingPolicy{}}}
	cases := []struct {
		name   string
		w      *schedulingv1alpha1.Workload
		size   int
		isGang bool
		why    string
	}{
		{name: "no Workload yet", isGang: true, why: "gang job/workers waits for its Workload job (scheduling.k8s.io), which says how many members pod group workers needs"},
		{name: "a gang policy", w: workload(gang("driver", 1), gang("workers", 4)), size: 4, isGang: true},
		{name: "a basic policy", w: workload(basic)},
		{name: "no such pod group", w: workload(gang("driver", 1)), isGang: true, why: "gang job/workers waits: Workload job has no pod group workers"},
		{name: "a minCount beyond Flotilla's gangs", w: workload(gang("workers", 5000)), isGang: true, why: "asks pod group workers for a minCount of 5000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			size, isGang, why := placement.WorkloadGang(tc.w, ref)
			if size != tc.size || isGang != tc.isGang || !strings.Contains(why, tc.why) || (tc.why == "") != (why == "") {
				t.Errorf("WorkloadGang = %d, %v, %q; want %d, %v, %q", size, isGang, why, tc.size, tc.isGang, tc.why)
			}
		})
	}
}

// A PodGroup (Kubernetes 1.36+) is read from its JSON as the API server serves it: a gang
// policy's minCount is the gang's size, a basic policy is no gang, and what is missing is said.
func TestPodGroupGang(t *testing.T) {
	read := func(raw string) *placement.PodGroup {
		var pg placement.PodGroup
		if err := json.Unmarshal([]byte(raw), &pg); err != nil {
			t.Fatal(err)
		}
		return &pg
	}
	cases := []struct {
		name   string
		pg     *placement.PodGroup
		size   int
		isGang bool
		why    string
	}{
		{name: "no PodGroup yet", isGang: true, why: "gang trainers waits for its PodGroup trainers (scheduling.k8s.io), which says how many members it needs"},
		{name: "a gang policy", pg: read(`{"apiVersion":"scheduling.k8s.io/v1beta1","kind":"PodGroup","spec":{"schedulingPolicy":{"gang":{"minCount":4}}}}`), size: 4, isGang: true},
		{name: "a basic policy", pg: read(`{"spec":{"schedulingPolicy":{"basic":{}}}}`)},
		{name: "a minCount beyond Flotilla's gangs", pg: read(`{"spec":{"schedulingPolicy":{"gang":{"minCount":5000}}}}`), isGang: true, why: "asks for a minCount of 5000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			size, isGang, why := placement.PodGroupGang(tc.pg, "trainers")
			if size != tc.size || isGang != tc.isGang || !strings.Contains(why, tc.why) || (tc.why == "") != (why == "") {
				t.Errorf("PodGroupGang = %d, %v, %q; want %d, %v, %q", size, isGang, why, tc.size, tc.isGang, tc.why)
			}
		})
	}
}

// gangCluster is a ready cluster whose nodes have the free CPU given, in cores.
func gangCluster(name string, cores ...int64) placement.ClusterView {
	cl := placement.ClusterView{Name: name, Ready: true, Labels: map[string]string{flotillav1.LabelCluster: name}}
	for i, c := range cores {
		cl.Nodes = append(cl.Nodes, placement.NodeView{Name: name + "-" + string(rune('a'+i)),
			Free: corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(c, resource.DecimalSI), corev1.ResourcePods: resource.MustParse("110")}})
	}
	return cl
}

func members(n int, cores int64, ann map[string]string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "m" + string(rune('0'+i)), Annotations: ann},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cores, resource.DecimalSI)}}}}}}
		out = append(out, p)
	}
	return out
}

func TestPlaceGang(t *testing.T) {
	lent := gangCluster("lent", 8)
	lent.Lent = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
	notReady := gangCluster("away", 8)
	notReady.Ready, notReady.Reason = false, "not answering"
	cases := []struct {
		name     string
		members  []*corev1.Pod
		clusters []placement.ClusterView
		want     string
		why      []string
	}{
		{name: "room for 3 in one, 4 in the other: the other", members: members(4, 1, nil),
			clusters: []placement.ClusterView{gangCluster("s1", 3), gangCluster("s2", 4)}, want: "s2"},
		{name: "room for 3 in each: none, each cluster says so", members: members(4, 1, nil),
			clusters: []placement.ClusterView{gangCluster("s1", 3), gangCluster("s2", 2, 1)},
			why:      []string{"s1: its nodes have room for 3 of the gang's 4 members", "s2: its nodes have room for 3 of the gang's 4 members"}},
		{name: "members packed over a cluster's nodes", members: members(4, 2, nil),
			clusters: []placement.ClusterView{gangCluster("s1", 4, 4)}, want: "s1"},
		{name: "nodes too small for any member", members: members(2, 4, nil),
			clusters: []placement.ClusterView{gangCluster("s1", 3, 3, 3)}, why: []string{"s1: its nodes have room for 0 of the gang's 2 members"}},
		{name: "both fit: the one with more free CPU", members: members(2, 1, nil),
			clusters: []placement.ClusterView{gangCluster("s1", 4), gangCluster("s2", 6)}, want: "s2"},
		{name: "both fit: the one the members weigh most", members: members(2, 1, map[string]string{flotillav1.AnnotationClusterWeights: "s1=10,s2=1"}),
			clusters: []placement.ClusterView{gangCluster("s1", 4), gangCluster("s2", 6)}, want: "s1"},
		{name: "the one weighed most does not fit: the other", members: members(2, 1, map[string]string{flotillav1.AnnotationClusterWeights: "s1=10,s2=1"}),
			clusters: []placement.ClusterView{gangCluster("s1", 1), gangCluster("s2", 6)}, want: "s2"},
		{name: "what a cluster lends bounds the whole gang", members: members(4, 1, nil),
			clusters: []placement.ClusterView{lent}, why: []string{"lent: it lends this primary too little for the whole gang (cpu 3 left of what it lends, 4 requested)"}},
		{name: "a cluster away", members: members(2, 1, nil), clusters: []placement.ClusterView{notReady},
			why: []string{"away: not ready (not answering)"}},
		{name: "every member must be allowed there", members: members(2, 1, map[string]string{flotillav1.AnnotationClusters: "s1"}),
			clusters: []placement.ClusterView{gangCluster("s1", 1), gangCluster("s2", 8)}, why: []string{"s1: its nodes have room for 1 of the gang's 2 members"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := placement.PlaceGang(tc.members, tc.clusters)
			if err != nil {
				t.Fatal(err)
			}
			if got.Cluster != tc.want {
				t.Errorf("cluster = %q (why %q), want %q", got.Cluster, got.Why, tc.want)
			}
			for _, w := range tc.why {
				if !strings.Contains(got.Why, w) {
					t.Errorf("why = %q, lacks %q", got.Why, w)
				}
			}
		})
	}
}

// A gang's member is never bound at admission, even where it alone would fit: it waits gated for
// the whole gang; a gang whose size does not parse is refused.
func TestDecideGatesAGangsMembers(t *testing.T) {
	clusters := []placement.ClusterView{gangCluster("s1", 8)}
	m := members(1, 1, map[string]string{flotillav1.AnnotationGang: "g", flotillav1.AnnotationGangSize: "2"})[0]
	d, err := placement.Decide(t.Context(), m, translate.Constraints{}, clusters, func([]int64) int { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	if !d.Gated || d.Cluster != "" || d.Affinity != nil || len(d.Feasible) != 1 {
		t.Errorf("decision = %+v", d)
	}
	m.Annotations[flotillav1.AnnotationGangSize] = "0"
	var rej *placement.Rejection
	if _, err := placement.Decide(t.Context(), m, translate.Constraints{}, clusters, nil); !errors.As(err, &rej) {
		t.Errorf("a gang of size 0: err = %v, want a Rejection", err)
	}
}

// A rebalance never moves a gang's members: moving some would split it.
func TestRebalanceLeavesAGangAlone(t *testing.T) {
	gang := members(4, 1, map[string]string{flotillav1.AnnotationGang: "g", flotillav1.AnnotationGangSize: "4"})
	for _, m := range gang {
		m.Spec.NodeName = flotillav1.VirtualNodeName("s1")
	}
	split, err := placement.Rebalance(t.Context(), gang, []placement.ClusterView{gangCluster("s1", 8), gangCluster("s2", 8)})
	if err != nil || len(split.Want) != 0 {
		t.Errorf("split = %+v, %v", split, err)
	}
}
