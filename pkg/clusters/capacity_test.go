package clusters

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

type nodeOpt func(*corev1.Node)

func node(name, cpu, mem string, opts ...nodeOpt) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
		corev1.ResourcePods: resource.MustParse("110"),
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
			corev1.LabelTopologyRegion: "eu", corev1.LabelTopologyZone: "eu-a",
		}},
		Status: corev1.NodeStatus{Allocatable: res, Capacity: res,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func notReady(n *corev1.Node)  { n.Status.Conditions[0].Status = corev1.ConditionFalse }
func cordoned(n *corev1.Node)  { n.Spec.Unschedulable = true }
func virtual(n *corev1.Node)   { n.Labels["type"] = "virtual-kubelet" }
func otherZone(n *corev1.Node) { n.Labels[corev1.LabelTopologyZone] = "eu-b" }
func noSchedule(n *corev1.Node) {
	n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
}
func preferNoSch(n *corev1.Node) {
	n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectPreferNoSchedule}}
}

type podOpt func(*corev1.Pod)

func pod(name, nodeName, cpu, mem string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func delegateOf(id string) podOpt {
	return func(p *corev1.Pod) { p.Labels[flotillav1.LabelPrimary] = id }
}
func succeeded(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }
func bigInit(p *corev1.Pod) {
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}
}

func sidecarAndOverhead(p *corev1.Pod) {
	always := corev1.ContainerRestartPolicyAlways
	p.Spec.InitContainers = []corev1.Container{{Name: "mesh", RestartPolicy: &always, Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}
	p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
}

// slimmedNodes is what the capacity watch's cache keeps of these nodes.
func slimmedNodes(t *testing.T, s *capacitySlim, in []*corev1.Node) []*corev1.Node {
	t.Helper()
	out := make([]*corev1.Node, len(in))
	for i, o := range in {
		n, err := s.transform(o)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = n.(*corev1.Node)
	}
	return out
}

// cachedUsages is what the capacity watch's cache gives of these pods.
func cachedUsages(t *testing.T, s *capacitySlim, in []*corev1.Pod) []PodUsage {
	t.Helper()
	out := make([]PodUsage, len(in))
	for i, o := range in {
		r, err := s.transform(o)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = r.(*podRecord).PodUsage
	}
	return out
}

// usagesOf are the pods' usages, read from the whole pods.
func usagesOf(in []*corev1.Pod, primaryID string) []PodUsage {
	out := make([]PodUsage, len(in))
	for i, p := range in {
		out[i] = UsageOf(p, primaryID)
	}
	return out
}

func TestComputeCapacity(t *testing.T) {
	tests := map[string]struct {
		nodes             []*corev1.Node
		pods              []*corev1.Pod
		wantCPU, wantFree string
		wantMem, freeMem  string
		wantEligible      int
		wantZone          string
	}{
		"sum of eligible nodes": {
			nodes:   []*corev1.Node{node("a", "4", "8Gi"), node("b", "2", "4Gi")},
			wantCPU: "6", wantFree: "6", wantMem: "12Gi", freeMem: "12Gi", wantEligible: 2, wantZone: "eu-a",
		},
		"not ready, cordoned, tainted and virtual nodes do not count; PreferNoSchedule does": {
			nodes: []*corev1.Node{node("a", "4", "8Gi"), node("b", "2", "4Gi", notReady), node("c", "2", "4Gi", cordoned),
				node("d", "2", "4Gi", noSchedule), node("e", "2", "4Gi", virtual), node("f", "1", "1Gi", preferNoSch)},
			wantCPU: "5", wantFree: "5", wantMem: "9Gi", freeMem: "9Gi", wantEligible: 2, wantZone: "eu-a",
		},
		"plain pods use allocatable, delegates of this primary do not": {
			nodes: []*corev1.Node{node("a", "4", "8Gi")},
			pods: []*corev1.Pod{pod("p", "a", "1", "1Gi"), pod("d", "a", "2", "2Gi", delegateOf("me")),
				pod("o", "a", "500m", "1Gi", delegateOf("another-primary"))},
			wantCPU: "4", wantFree: "2500m", wantMem: "8Gi", freeMem: "6Gi", wantEligible: 1, wantZone: "eu-a",
		},
		"terminal pods and pods on ineligible or no nodes do not count": {
			nodes:   []*corev1.Node{node("a", "4", "8Gi"), node("b", "4", "8Gi", cordoned)},
			pods:    []*corev1.Pod{pod("done", "a", "1", "1Gi", succeeded), pod("elsewhere", "b", "1", "1Gi"), pod("pending", "", "1", "1Gi")},
			wantCPU: "4", wantFree: "4", wantMem: "8Gi", freeMem: "8Gi", wantEligible: 1, wantZone: "eu-a",
		},
		"init containers count as the scheduler counts them": {
			nodes:   []*corev1.Node{node("a", "4", "8Gi")},
			pods:    []*corev1.Pod{pod("p", "a", "1", "1Gi", bigInit)},
			wantCPU: "4", wantFree: "1", wantMem: "8Gi", freeMem: "7Gi", wantEligible: 1, wantZone: "eu-a",
		},
		"sidecars run alongside, a runtime class adds its overhead": {
			nodes:   []*corev1.Node{node("a", "4", "8Gi")},
			pods:    []*corev1.Pod{pod("p", "a", "1", "1Gi", sidecarAndOverhead)},
			wantCPU: "4", wantFree: "2250m", wantMem: "8Gi", freeMem: "6Gi", wantEligible: 1, wantZone: "eu-a",
		},
		"allocatable floors at zero; mixed zones give no zone": {
			nodes:   []*corev1.Node{node("a", "1", "1Gi"), node("b", "1", "1Gi", otherZone)},
			pods:    []*corev1.Pod{pod("p", "a", "3", "3Gi")},
			wantCPU: "2", wantFree: "0", wantMem: "2Gi", freeMem: "0", wantEligible: 2, wantZone: "",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := ComputeCapacity(tc.nodes, usagesOf(tc.pods, "me"))
			slim := &capacitySlim{primaryID: "me"}
			if fromCache := ComputeCapacity(slimmedNodes(t, slim, tc.nodes), cachedUsages(t, slim, tc.pods)); !equality.Semantic.DeepEqual(c, fromCache) {
				t.Errorf("the capacity watch's cache gives another capacity:\n whole %+v\n cache %+v", c, fromCache)
			}
			check := func(what string, list corev1.ResourceList, res corev1.ResourceName, want string) {
				t.Helper()
				got := list[res]
				if got.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("%s %s = %s, want %s", what, res, got.String(), want)
				}
			}
			check("capacity", c.Capacity, corev1.ResourceCPU, tc.wantCPU)
			check("allocatable", c.Allocatable, corev1.ResourceCPU, tc.wantFree)
			check("capacity", c.Capacity, corev1.ResourceMemory, tc.wantMem)
			check("allocatable", c.Allocatable, corev1.ResourceMemory, tc.freeMem)
			if c.EligibleNodes != tc.wantEligible || c.NodeCount != len(tc.nodes) {
				t.Errorf("eligible %d of %d, want %d of %d", c.EligibleNodes, c.NodeCount, tc.wantEligible, len(tc.nodes))
			}
			if c.Zone != tc.wantZone || c.OS != "linux" || c.Arch != "amd64" || c.Region != "eu" {
				t.Errorf("os/arch/region/zone = %s/%s/%s/%s", c.OS, c.Arch, c.Region, c.Zone)
			}
		})
	}
}

// A tainted node does not add to what the virtual node offers every pod, but a pod that tolerates
// its taint may land there: the webhook sees it, with its taint and what is free on it.
func TestATaintedNodeIsListedForThePodsThatTolerateIt(t *testing.T) {
	c := ComputeCapacity([]*corev1.Node{node("a", "4", "8Gi"), node("gpu", "8", "16Gi", noSchedule), node("off", "8", "16Gi", notReady)},
		usagesOf([]*corev1.Pod{pod("on-gpu", "gpu", "2", "2Gi")}, "me"))
	if cpu := c.Capacity[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("4")) != 0 || c.EligibleNodes != 1 {
		t.Errorf("capacity cpu %s from %d nodes, want 4 from the untainted one", cpu.String(), c.EligibleNodes)
	}
	if free := c.Allocatable[corev1.ResourceCPU]; free.Cmp(resource.MustParse("4")) != 0 {
		t.Errorf("allocatable cpu %s: a pod on the tainted node is not in the capacity it is not in", free.String())
	}
	var names []string
	for _, n := range c.Nodes {
		names = append(names, n.Name)
		if n.Name == "gpu" {
			if len(n.Taints) != 1 || n.Free.Cpu().Cmp(resource.MustParse("6")) != 0 {
				t.Errorf("gpu node: taints %v free cpu %s, want its taint and 6", n.Taints, n.Free.Cpu().String())
			}
		}
	}
	if strings.Join(names, ",") != "a,gpu" {
		t.Errorf("nodes listed %v, want a and gpu (not the NotReady one)", names)
	}
}

func TestQuantizeAndChangedMoreThan(t *testing.T) {
	q := Quantize(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1234m"), corev1.ResourceMemory: resource.MustParse("1500Ki")})
	if cpu := q[corev1.ResourceCPU]; cpu.MilliValue() != 1230 {
		t.Errorf("cpu quantized to %s", cpu.String())
	}
	if mem := q[corev1.ResourceMemory]; mem.Value() != 1<<20 {
		t.Errorf("memory quantized to %s", mem.String())
	}
	base := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")}
	tests := []struct {
		cur  string
		want bool
	}{{"100", false}, {"99.5", false}, {"101", false}, {"98", true}, {"102", true}}
	for _, tc := range tests {
		cur := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(tc.cur)}
		if got := ChangedMoreThan(base, cur, 0.01); got != tc.want {
			t.Errorf("100 -> %s: changed = %v, want %v", tc.cur, got, tc.want)
		}
	}
	if !ChangedMoreThan(base, corev1.ResourceList{}, 0.01) {
		t.Error("a vanished resource is a change")
	}
}

// The capacity watch keeps a small record per pod, and one request list per shape: a pod of a
// 10,000-replica workload must not cost a whole Pod and its own resource list (the shared lists'
// bound is resourcelists' spec).
func TestCapacityCacheKeepsARecordPerPodAndOneListPerShape(t *testing.T) {
	slim := &capacitySlim{primaryID: "me"}
	record := func(p *corev1.Pod) *podRecord {
		t.Helper()
		p.Namespace, p.UID, p.ResourceVersion = "ns", types.UID("uid-"+p.Name), "7"
		r, err := slim.transform(p)
		if err != nil {
			t.Fatal(err)
		}
		return r.(*podRecord)
	}
	a := record(pod("a", "n", "1", "1Gi", delegateOf("me")))
	b := record(pod("b", "n", "1000m", "1024Mi"))
	c := record(pod("c", "n", "2", "1Gi", delegateOf("another")))
	if reflect.ValueOf(a.Requests).Pointer() != reflect.ValueOf(b.Requests).Pointer() {
		t.Error("two pods that request the same hold two lists")
	}
	if reflect.ValueOf(a.Requests).Pointer() == reflect.ValueOf(c.Requests).Pointer() {
		t.Error("pods that request differently share a list")
	}
	if key, err := cache.MetaNamespaceKeyFunc(a); err != nil || key != "ns/a" || a.UID != "uid-a" || a.ResourceVersion != "7" {
		t.Errorf("the record keys as %q (%v), uid %s, resourceVersion %s", key, err, a.UID, a.ResourceVersion)
	}
	if a.Labels != nil || a.Annotations != nil || !a.OfPrimary || c.OfPrimary || a.NodeName != "n" {
		t.Errorf("records keep what capacity reads and only that: %+v, %+v", a, c)
	}
	if again, err := slim.transform(a); err != nil || again != any(a) {
		t.Errorf("the transform is not idempotent: %v, %v", again, err)
	}
}

// The pods controller stores the records the transform makes: keyed, updated and deleted by them.
func TestCapacityPodsControllerStoresRecords(t *testing.T) {
	p := pod("a", "n", "1", "1Gi")
	p.Namespace = "ns"
	cs := fake.NewClientset(p)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	records := newPodRecords(func() int { return 10 })
	ctl := newPodsController(cs, &capacitySlim{primaryID: "me"}, records, func() {}, nil)
	go ctl.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), ctl.HasSynced) {
		t.Fatal("the controller did not sync")
	}
	p.Spec.NodeName = "m"
	if _, err := cs.CoreV1().Pods("ns").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		u := records.usages()
		return len(u) == 1 && u[0].NodeName == "m", nil
	}); err != nil {
		t.Fatalf("the update did not reach the store: %v", records.usages())
	}
	if err := cs.CoreV1().Pods("ns").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return len(records.usages()) == 0, nil
	}); err != nil {
		t.Fatalf("the delete did not reach the store: %v", records.usages())
	}
}

func TestLendShowsTheLesserOfTheAllowanceAndWhatIsFree(t *testing.T) {
	free := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceCPU: resource.MustParse("2"),
		corev1.ResourceMemory: resource.MustParse("4Gi")}
	got := Lend(free, corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10"), "requests.cpu": resource.MustParse("8"),
		"limits.memory": resource.MustParse("1Gi"), "nvidia.com/gpu": resource.MustParse("4")})
	want := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10"), corev1.ResourceCPU: resource.MustParse("2"),
		corev1.ResourceMemory: resource.MustParse("4Gi")}
	if len(got) != len(want) {
		t.Fatalf("Lend = %v, want %v (a resource the node lacks is not offered)", got, want)
	}
	for name, q := range want {
		if g := got[name]; g.Cmp(q) != 0 {
			t.Errorf("%s = %s, want %s", name, g.String(), q.String())
		}
	}
	if p := free[corev1.ResourcePods]; p.Value() != 110 {
		t.Error("Lend changed its input")
	}
	if got := Lend(free, nil); got[corev1.ResourcePods] != free[corev1.ResourcePods] {
		t.Error("no allowance: what is free")
	}
}

func TestRoomIsWhatIsLentLessWhatIsUsed(t *testing.T) {
	got := Room(corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10"), "nvidia.com/gpu": resource.MustParse("4"),
		"limits.cpu": resource.MustParse("8"), "requests.memory": resource.MustParse("1Gi")},
		corev1.ResourceList{corev1.ResourcePods: resource.MustParse("12"), "requests.nvidia.com/gpu": resource.MustParse("1"),
			"requests.memory": resource.MustParse("256Mi")})
	want := map[corev1.ResourceName]string{corev1.ResourcePods: "0", "nvidia.com/gpu": "3", corev1.ResourceMemory: "768Mi"}
	if len(got) != len(want) {
		t.Fatalf("Room = %v, want %v (limits.* left out)", got, want)
	}
	for name, q := range want {
		if g := got[name]; g.String() != q {
			t.Errorf("%s = %s, want %s", name, g.String(), q)
		}
	}
	if Room(nil, nil) != nil {
		t.Error("no allowance: no limit")
	}
}

// Accelerators on tainted nodes count in the capacity (the pods that ask for them tolerate the
// taints GPU nodes carry), less what the secondary's own pods take of them; the largest free on
// one node is what one pod may ask for.
func TestTaintedNodesGPUsCountAndTheLargestFreeIsPerNode(t *testing.T) {
	gpus := func(n string) nodeOpt {
		return func(node *corev1.Node) {
			node.Status.Allocatable[gpu] = resource.MustParse(n)
			node.Status.Capacity[gpu] = resource.MustParse(n)
		}
	}
	usesGPU := func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests[gpu] = resource.MustParse("1") }
	nodes := []*corev1.Node{node("a", "4", "8Gi"), node("g1", "8", "16Gi", noSchedule, gpus("1")), node("g2", "8", "16Gi", noSchedule, gpus("1")),
		node("g4", "8", "16Gi", noSchedule, gpus("4"))}
	c := ComputeCapacity(nodes, usagesOf([]*corev1.Pod{pod("theirs", "g4", "1", "1Gi", usesGPU)}, "me"))
	if total, free := c.Capacity[gpu], c.Allocatable[gpu]; total.Cmp(resource.MustParse("6")) != 0 || free.Cmp(resource.MustParse("5")) != 0 {
		t.Errorf("gpus %s, allocatable %s: want 6 from the tainted nodes, 5 free", total.String(), free.String())
	}
	if cpu := c.Capacity[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("4")) != 0 {
		t.Errorf("capacity cpu %s: a tainted node's CPU is not every pod's", cpu.String())
	}
	largest := c.LargestFree()
	if g := largest[gpu]; g.Cmp(resource.MustParse("3")) != 0 {
		t.Errorf("largest free gpus on one node %s, want 3 (g4, one taken)", g.String())
	}
	if cpu := largest[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("8")) != 0 {
		t.Errorf("largest free cpu on one node %s, want 8", cpu.String())
	}
}

const gpu = corev1.ResourceName("nvidia.com/gpu")
