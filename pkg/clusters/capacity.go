package clusters

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

// Capacity is what a secondary offers, computed from its nodes and pods.
type Capacity struct {
	// NodeCount counts every node of the cluster; EligibleNodes those that count for capacity.
	NodeCount, EligibleNodes int
	// Capacity sums allocatable over eligible nodes; Allocatable subtracts the requests of pods
	// that are not this primary's delegates (those are charged through their proxies already).
	Capacity, Allocatable corev1.ResourceList
	// OS, Arch, Region and Zone are the eligible nodes' values when they all agree, else empty.
	OS, Arch, Region, Zone string
	// Nodes are the eligible nodes with what is free on each (every pod counted, delegates
	// included), for the webhook's feasibility check.
	Nodes []NodeCapacity
	// PodsOverLimit says the secondary holds more pods bound to nodes than the manager keeps
	// records of (podRecordLimit): what they take is not known, so Allocatable and every node's
	// Free are zero, nothing offered rather than room that may be taken, until a list of its pods
	// finds them within the limit again.
	PodsOverLimit bool
	// Devices are the cluster's devices (DRA) as placement judges claims by; DeviceCounts how
	// many of each class it has, and how many are free.
	Devices      *placement.DeviceView
	DeviceCounts []placement.DeviceClassCount
}

// Lend is the allocatable a virtual node shows when its secondary lends the primary at most
// allowance (a PrimaryAllowance's hard limits; nil: no limit): for each resource, the lesser of
// what is free and the limit (a resource the node does not offer stays unoffered). A limit on requests.<name> (or <name>) bounds <name>; limits.* and
// object counts bound nothing a node shows.
func Lend(allocatable, allowance corev1.ResourceList) corev1.ResourceList {
	if len(allowance) == 0 || allocatable == nil {
		return allocatable
	}
	out := allocatable.DeepCopy()
	for name, limit := range allowance {
		node, shown := nodeResource(name)
		if !shown {
			continue
		}
		if free, ok := out[node]; ok && limit.Cmp(free) < 0 {
			out[node] = limit.DeepCopy()
		}
	}
	return out
}

// nodeResource is the resource a node offers that a quota's limit bounds (requests.cpu: cpu, as
// placement.QuotaResource names it), and whether a node shows one at all (limits.* and object
// counts bound nothing it shows).
func nodeResource(name corev1.ResourceName) (corev1.ResourceName, bool) {
	n := placement.QuotaResource(name)
	return n, !strings.HasPrefix(string(n), "limits.") && !strings.Contains(string(n), "count/")
}

// Room is what a secondary still lends the primary, by node resource name: each resource its
// allowance limits (requests.<name> read as <name>; limits.* and object counts left out) less
// what its quotas count used (under the same names, or as the quotas name them). Nil when it
// lends without limit. Never below zero.
func Room(allowance, used corev1.ResourceList) corev1.ResourceList {
	if len(allowance) == 0 {
		return nil
	}
	usedBy := corev1.ResourceList{}
	for name, q := range used {
		if n, ok := nodeResource(name); ok {
			usedBy[n] = q
		}
	}
	out := corev1.ResourceList{}
	for name, limit := range allowance {
		n, ok := nodeResource(name)
		if !ok {
			continue
		}
		room := limit.DeepCopy()
		room.Sub(usedBy[n])
		if room.Sign() < 0 {
			room = resource.Quantity{}
		}
		if have, seen := out[n]; !seen || room.Cmp(have) < 0 {
			out[n] = room
		}
	}
	return out
}

// PodUsage is what capacity reads of a pod: where it runs and what it takes of its node.
type PodUsage struct {
	NodeName string
	// Terminal pods (Succeeded, Failed) take nothing.
	Terminal bool
	// OfPrimary marks this primary's delegates: they take room on their node, but not from
	// Allocatable, since their proxies are charged for them already.
	OfPrimary bool
	// Requests as the scheduler counts them (init containers, sidecars, overhead). Read only:
	// the capacity watch shares one list between the pods that request the same.
	Requests corev1.ResourceList
}

// UsageOf is a pod's usage; primaryID says whose delegates are charged through their proxies.
func UsageOf(p *corev1.Pod, primaryID string) PodUsage {
	return PodUsage{
		NodeName:  p.Spec.NodeName,
		Terminal:  p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed,
		OfPrimary: primaryID != "" && p.Labels[flotillav1.LabelPrimary] == primaryID,
		Requests:  resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}),
	}
}

// NodeCapacity is one eligible node of a secondary.
type NodeCapacity struct {
	Name   string
	Labels map[string]string
	Taints []corev1.Taint
	Free   corev1.ResourceList
	// Allocatable is the node's own: a pod that requests more than it never fits there, however
	// much frees.
	Allocatable corev1.ResourceList
}

// EligibleNode says whether a node's resources count in the cluster's capacity (what its virtual
// node offers every pod): a usable node without NoSchedule or NoExecute taints.
func EligibleNode(n *corev1.Node) bool {
	if !usableNode(n) {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	return true
}

// usableNode says whether a pod may land on a node at all: Ready, schedulable, and not itself a
// virtual node. A tainted one is usable by the pods that tolerate its taints: the webhook fits a
// delegate to it node by node (Capacity.Nodes), though its resources are not in the capacity
// every pod sees.
func usableNode(n *corev1.Node) bool {
	if n.Spec.Unschedulable || n.Labels[flotillav1.LabelNodeType] == flotillav1.NodeTypeVirtualKubelet {
		return false
	}
	return placement.NodeReady(n)
}

// ComputeCapacity computes a secondary's capacity as DESIGN.md's formula says: requests as the
// scheduler counts them (init containers, sidecars, overhead), each running pod using one "pods",
// allocatable floored at zero, everything quantized so small churn does not rewrite the node.
func ComputeCapacity(nodes []*corev1.Node, pods []PodUsage) Capacity {
	c := Capacity{NodeCount: len(nodes), Capacity: corev1.ResourceList{}}
	eligible, usable := map[string]bool{}, map[string]bool{}
	agree := map[string]*string{corev1.LabelOSStable: &c.OS, corev1.LabelArchStable: &c.Arch,
		corev1.LabelTopologyRegion: &c.Region, corev1.LabelTopologyZone: &c.Zone}
	mixed := map[string]bool{}
	tainted := map[string]bool{}
	for _, n := range nodes {
		usable[n.Name] = usableNode(n)
		if !EligibleNode(n) {
			if usable[n.Name] {
				// A tainted node's accelerators (extended resources) count: the pods that ask for
				// them tolerate their taints, as GPU nodes are tainted for.
				tainted[n.Name] = true
				addTo(c.Capacity, extendedOf(n.Status.Allocatable))
			}
			continue
		}
		eligible[n.Name] = true
		c.EligibleNodes++
		addTo(c.Capacity, n.Status.Allocatable)
		for label, dst := range agree {
			v := n.Labels[label]
			switch {
			case mixed[label]:
			case c.EligibleNodes == 1:
				*dst = v
			case *dst != v:
				*dst, mixed[label] = "", true
			}
		}
	}
	used := corev1.ResourceList{}
	usedOnNode := map[string]corev1.ResourceList{}
	for _, u := range pods {
		if !usable[u.NodeName] || u.Terminal {
			continue
		}
		if usedOnNode[u.NodeName] == nil {
			usedOnNode[u.NodeName] = corev1.ResourceList{}
		}
		addTo(usedOnNode[u.NodeName], u.Requests)
		addOnePod(usedOnNode[u.NodeName])
		switch {
		case u.OfPrimary:
		case eligible[u.NodeName]:
			addTo(used, u.Requests)
			addOnePod(used)
		case tainted[u.NodeName]:
			addTo(used, extendedOf(u.Requests))
		}
	}
	for _, n := range nodes {
		if usable[n.Name] {
			c.Nodes = append(c.Nodes, NodeCapacity{Name: n.Name, Labels: n.Labels, Taints: n.Spec.Taints,
				Free: subtractFloored(n.Status.Allocatable, usedOnNode[n.Name]), Allocatable: n.Status.Allocatable})
		}
	}
	c.Allocatable = subtractFloored(c.Capacity, used)
	c.Capacity, c.Allocatable = Quantize(c.Capacity), Quantize(c.Allocatable)
	return c
}

// extendedOf keeps a list's extended resources (nvidia.com/gpu and the like).
func extendedOf(l corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range l {
		if extendedResource(name) {
			out[name] = q
		}
	}
	return out
}

// extendedResource says whether a resource is an extended one, as Kubernetes names them: with a
// domain, not kubernetes.io's (cpu, memory, pods, hugepages-* and ephemeral-storage have none).
func extendedResource(name corev1.ResourceName) bool {
	n := string(name)
	return strings.Contains(n, "/") && !strings.Contains(n, "kubernetes.io/") && !strings.HasPrefix(n, "requests.")
}

// LargestFree is, for each resource, the most free on one node that can run pods: what one pod
// may ask for there at most, where the capacity's sum may be spread over many nodes.
func (c Capacity) LargestFree() corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, n := range c.Nodes {
		for name, q := range n.Free {
			if cur, ok := out[name]; !ok || q.Cmp(cur) > 0 {
				out[name] = q.DeepCopy()
			}
		}
	}
	return Quantize(out)
}

// subtractFloored returns total - used for each resource of total, never below zero.
func subtractFloored(total, used corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, t := range total {
		free := t.DeepCopy()
		if u, ok := used[name]; ok {
			free.Sub(u)
		}
		if free.Sign() < 0 {
			free = *resource.NewQuantity(0, t.Format)
		}
		out[name] = free
	}
	return out
}

func addTo(dst, src corev1.ResourceList) {
	for name, q := range src {
		cur := dst[name]
		cur.Add(q)
		dst[name] = cur
	}
}

// addOnePod counts a running pod against its node's "pods" allocatable.
func addOnePod(dst corev1.ResourceList) {
	cur := dst[corev1.ResourcePods]
	cur.Add(*resource.NewQuantity(1, resource.DecimalSI))
	dst[corev1.ResourcePods] = cur
}

// Quantize rounds CPU down to 10 millicores and memory and storage down to MiB.
func Quantize(list corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range list {
		switch name {
		case corev1.ResourceCPU:
			out[name] = *resource.NewMilliQuantity(q.MilliValue()/10*10, resource.DecimalSI)
		case corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourceStorage:
			out[name] = *resource.NewQuantity(q.Value()/(1<<20)*(1<<20), resource.BinarySI)
		default:
			out[name] = q.DeepCopy()
		}
	}
	return out
}

// ChangedMoreThan says whether any resource differs by more than fraction (0.01 = 1 %) of the
// old value, or appeared or disappeared.
func ChangedMoreThan(old, cur corev1.ResourceList, fraction float64) bool {
	if len(old) != len(cur) {
		return true
	}
	for name, o := range old {
		n, ok := cur[name]
		if !ok {
			return true
		}
		ov, nv := o.AsApproximateFloat64(), n.AsApproximateFloat64()
		diff := ov - nv
		if diff < 0 {
			diff = -diff
		}
		if (ov == 0 && nv != 0) || (ov != 0 && diff/ov > fraction) {
			return true
		}
	}
	return false
}
