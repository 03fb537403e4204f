package placement

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha1 "k8s.io/api/scheduling/v1alpha1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// MaxGangSize bounds a gang's size: its members are packed onto a cluster's nodes one by one.
const MaxGangSize = 1000

// Gang is the group an elected pod is placed with: all its members in one cluster, or none.
type Gang struct {
	Name string
	Size int
	// Workload is the pod group of the Workload API (scheduling.k8s.io) the pod names in
	// spec.workloadRef, when that is what makes it a member. Size is then unknown (0) until the
	// Workload is read (WorkloadGang): the pod may be created before its Workload.
	Workload *corev1.WorkloadReference
	// PodGroup is the PodGroup (scheduling.k8s.io, Kubernetes 1.36+) the pod names in
	// spec.schedulingGroup (flotilla.dev/pod-group, which the webhook writes from it), when that is
	// what makes it a member. Size is then unknown (0) until the PodGroup is read (PodGroupGang).
	PodGroup string
}

// Same says whether g and o are one gang: one name, from the same kind of declaration.
func (g Gang) Same(o Gang) bool {
	return g.Name == o.Name && (g.Workload == nil) == (o.Workload == nil) && g.PodGroup == o.PodGroup
}

// GangOf is the gang a pod belongs to: flotilla.dev/gang and flotilla.dev/gang-size, or Kueue's
// pod group (its name label and total count), or the Workload API's pod group its
// spec.workloadRef names (immutable, so it is trusted as the seal trusts the annotations), or the
// PodGroup its spec.schedulingGroup names (flotilla.dev/pod-group, from the field). ok is
// false for a pod of no gang; an error is a gang whose size does not parse or is out of range.
func GangOf(pod *corev1.Pod) (Gang, bool, error) {
	name, size := pod.Annotations[flotillav1.AnnotationGang], pod.Annotations[flotillav1.AnnotationGangSize]
	sizeKey := flotillav1.AnnotationGangSize
	if name == "" {
		name, size = pod.Labels[flotillav1.LabelKueuePodGroup], pod.Annotations[flotillav1.AnnotationKueuePodGroupTotal]
		sizeKey = flotillav1.AnnotationKueuePodGroupTotal
	}
	if name == "" && pod.Spec.WorkloadRef != nil {
		return Gang{Name: WorkloadGangName(pod.Spec.WorkloadRef), Workload: pod.Spec.WorkloadRef}, true, nil
	}
	if group := pod.Annotations[flotillav1.AnnotationPodGroup]; name == "" && group != "" {
		return Gang{Name: group, PodGroup: group}, true, nil
	}
	if name == "" {
		return Gang{}, false, nil
	}
	n, err := strconv.Atoi(size)
	if err != nil || n < 1 || n > MaxGangSize {
		return Gang{}, false, Rejectf("flotilla cannot elect this pod: gang %q needs %s, a count of its members from 1 to %d (got %q)", name, sizeKey, MaxGangSize, size)
	}
	return Gang{Name: name, Size: n}, true, nil
}

// GangPlacement is where a whole gang goes: Cluster, or "" and why no cluster takes every member.
type GangPlacement struct {
	Cluster string
	Why     string
}

// PlaceGang finds the cluster that runs every member of a gang at once: one every member may go to
// (its chosen clusters, its data), ready, lending room for all of them, whose nodes take them all
// together (each member's delegate packed onto the nodes, largest first, each node's free room
// shrinking as it fills). Of those that do, the one its flotilla.dev/cluster-weights weighs most,
// then the one with the most free CPU left; none: why, per cluster. members are the proxies, each with the constraints the webhook kept for its delegate.
func PlaceGang(members []*corev1.Pod, clusters []ClusterView) (GangPlacement, error) {
	if len(members) == 0 {
		return GangPlacement{Why: "no member waits to be placed"}, nil
	}
	ms, eligible, err := gangMembers(members, clusters)
	if err != nil {
		return GangPlacement{}, err
	}
	total := corev1.ResourceList{}
	for _, m := range ms {
		for name, q := range m.requests {
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
	}
	// Where the members would rather be: their cluster weights (those of the first member; a
	// gang's members share a template), then the most free CPU.
	weights, err := ClusterWeights(members[0], clusters)
	if err != nil {
		return GangPlacement{}, err
	}
	var why []string
	best, bestWeight, bestFree := "", int64(-1), int64(-1)
	for _, cl := range clusters {
		if eligible[cl.Name] < len(ms) {
			continue // a member may not go there
		}
		if reason := gangMisfit(cl, total, len(ms), func(free []corev1.ResourceList) int { return pack(cl.Nodes, free, ms) }); reason != "" {
			why = append(why, cl.Name+": "+reason)
			continue
		}
		weight := weights[cl.Name]
		if left := freeCPU([]string{cl.Name}, clusters)[0]; weight > bestWeight || (weight == bestWeight && left > bestFree) {
			best, bestWeight, bestFree = cl.Name, weight, left
		}
	}
	if best != "" {
		return GangPlacement{Cluster: best}, nil
	}
	if len(why) == 0 {
		return GangPlacement{Why: "no cluster is one every member may go to"}, nil
	}
	sort.Strings(why)
	return GangPlacement{Why: strings.Join(why, "; ")}, nil
}

// gangMember is a member's delegate as placement judges it: its constraints applied, its
// requests, its required node affinity.
type gangMember struct {
	delegate *corev1.Pod
	requests corev1.ResourceList
	required nodeaffinity.RequiredNodeAffinity
}

// gangMembers are the members' delegates, largest first (CPU, then memory: the usual
// first-fit-decreasing order), and how many members may go to each cluster.
func gangMembers(members []*corev1.Pod, clusters []ClusterView) ([]gangMember, map[string]int, error) {
	ms := make([]gangMember, 0, len(members))
	eligible := map[string]int{}
	for _, m := range members {
		c, err := translate.ConstraintsOf(m)
		if err != nil {
			return nil, nil, fmt.Errorf("pod %s: %w", m.Name, err)
		}
		weights, err := ClusterWeights(m, clusters)
		if err != nil {
			return nil, nil, err
		}
		chosen, err := chosenClusters(m, clusters, weights)
		if err != nil {
			return nil, nil, err
		}
		for name := range chosen {
			if c.DataCluster == "" || name == c.DataCluster {
				eligible[name]++
			}
		}
		d := m.DeepCopy()
		d.Spec.NodeSelector, d.Spec.Affinity, d.Spec.Tolerations = c.NodeSelector, c.Affinity, c.Tolerations
		ms = append(ms, gangMember{delegate: d, requests: resourcehelper.PodRequests(d, resourcehelper.PodResourcesOptions{}),
			required: nodeaffinity.GetRequiredNodeAffinity(d)})
	}
	sort.SliceStable(ms, func(i, j int) bool {
		ci, cj := ms[i].requests[corev1.ResourceCPU], ms[j].requests[corev1.ResourceCPU]
		if c := ci.Cmp(cj); c != 0 {
			return c > 0
		}
		mi, mj := ms[i].requests[corev1.ResourceMemory], ms[j].requests[corev1.ResourceMemory]
		return mi.Cmp(mj) > 0
	})
	return ms, eligible, nil
}

// pack places the members one by one on the first node that takes each with the room left
// (free, which shrinks as they are placed) and says how many it placed.
func pack(nodes []NodeView, free []corev1.ResourceList, ms []gangMember) int {
	placed := 0
	for _, m := range ms {
		i := firstNodeFor(nodes, free, m.delegate, m.requests, m.required)
		if i < 0 {
			return placed
		}
		for name, q := range m.requests {
			f := free[i][name]
			f.Sub(q)
			free[i][name] = f
		}
		placed++
	}
	return placed
}

// gangMisfit says why a cluster cannot run a whole gang now ("" when it can): it is away,
// cordoned, tainted against proxies, lends too little for all of them, or its nodes take only some
// (pack packs them onto copies of the nodes' free room and says how many it placed).
func gangMisfit(cl ClusterView, total corev1.ResourceList, members int, pack func(free []corev1.ResourceList) int) string {
	if cl.Denied != "" {
		return cl.Denied
	}
	one := corev1.ResourceList{}
	if reason, _, _ := clusterMisfit(ClusterView{Name: cl.Name, Ready: cl.Ready, Reason: cl.Reason, Cordoned: cl.Cordoned, Taints: cl.Taints,
		NodesUnknown: true}, nil, one, nodeaffinity.RequiredNodeAffinity{}, false); reason != "" {
		return reason
	}
	need := total.DeepCopy()
	need[corev1.ResourcePods] = *resource.NewQuantity(int64(members), resource.DecimalSI)
	if short := lentShort(cl.Lent, need); short != "" {
		return "it lends this primary too little for the whole gang (" + short + ")"
	}
	if cl.NodesUnknown {
		return ""
	}
	free := make([]corev1.ResourceList, len(cl.Nodes))
	for i, n := range cl.Nodes {
		free[i] = n.Free.DeepCopy()
	}
	if placed := pack(free); placed < members {
		return fmt.Sprintf("its nodes have room for %d of the gang's %d members", placed, members)
	}
	return ""
}

// firstNodeFor is the first node that takes a delegate with the room left (free), -1 when none.
func firstNodeFor(nodes []NodeView, free []corev1.ResourceList, delegate *corev1.Pod, requests corev1.ResourceList, required nodeaffinity.RequiredNodeAffinity) int {
	for i, n := range nodes {
		n.Free = free[i]
		if reason, _ := nodeMisfit(n, delegate, requests, required); reason == "" {
			return i
		}
	}
	return -1
}

// WorkloadGangName names a Workload API pod group's gang in messages and locks: the Workload, the
// pod group and, where the group is replicated, the replica's key.
func WorkloadGangName(ref *corev1.WorkloadReference) string {
	name := ref.Name + "/" + ref.PodGroup
	if ref.PodGroupReplicaKey != "" {
		name += "/" + ref.PodGroupReplicaKey
	}
	return name
}

// WorkloadGang reads the gang of the pod group ref names from its Workload w (nil: there is none
// yet). gang is false for a group whose policy is basic: its pods are placed one by one. A gang's
// size is its policy's minCount: Flotilla waits for that many members, then places every member
// there is together. why, when not empty, says what the members wait for (the Workload, or a pod
// group it does not have).
func WorkloadGang(w *schedulingv1alpha1.Workload, ref *corev1.WorkloadReference) (size int, gang bool, why string) {
	if w == nil {
		return 0, true, fmt.Sprintf("gang %s waits for its Workload %s (scheduling.k8s.io), which says how many members pod group %s needs", WorkloadGangName(ref), ref.Name, ref.PodGroup)
	}
	for _, g := range w.Spec.PodGroups {
		if g.Name != ref.PodGroup {
			continue
		}
		if g.Policy.Gang == nil {
			return 0, false, ""
		}
		n := int(g.Policy.Gang.MinCount)
		if n < 1 || n > MaxGangSize {
			return 0, true, fmt.Sprintf("gang %s waits: Workload %s asks pod group %s for a minCount of %d, and Flotilla places gangs of 1 to %d members", WorkloadGangName(ref), ref.Name, ref.PodGroup, n, MaxGangSize)
		}
		return n, true, ""
	}
	return 0, true, fmt.Sprintf("gang %s waits: Workload %s has no pod group %s", WorkloadGangName(ref), ref.Name, ref.PodGroup)
}

// PodGroup is what Flotilla reads of a PodGroup (scheduling.k8s.io: v1beta1 from Kubernetes
// 1.37, v1alpha2 in 1.36): its scheduling policy, the same in both. The API types Flotilla is
// built with predate it.
type PodGroup struct {
	Spec struct {
		SchedulingPolicy struct {
			Basic *struct{} `json:"basic,omitempty"`
			Gang  *struct {
				MinCount int32 `json:"minCount"`
			} `json:"gang,omitempty"`
		} `json:"schedulingPolicy"`
	} `json:"spec"`
}

// PodGroupGang reads the gang of PodGroup name from pg (nil: there is none yet). gang is false for
// a group whose policy is not a gang's (basic): its pods are placed one by one. A gang's size is
// its minCount; why, when not empty, says what the members wait for.
func PodGroupGang(pg *PodGroup, name string) (size int, gang bool, why string) {
	if pg == nil {
		return 0, true, fmt.Sprintf("gang %s waits for its PodGroup %s (scheduling.k8s.io), which says how many members it needs", name, name)
	}
	if pg.Spec.SchedulingPolicy.Gang == nil {
		return 0, false, ""
	}
	n := int(pg.Spec.SchedulingPolicy.Gang.MinCount)
	if n < 1 || n > MaxGangSize {
		return 0, true, fmt.Sprintf("gang %s waits: its PodGroup asks for a minCount of %d, and Flotilla places gangs of 1 to %d members", name, n, MaxGangSize)
	}
	return n, true, ""
}
