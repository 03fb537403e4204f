package virtualnode

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// PortRange is where the virtual nodes' kubelet ports come from: First, First+1, ... Count of
// them, one per virtual node. Count 0: no kubelet API (every node advertises port 0).
type PortRange struct {
	First, Count int32
}

// Contains says whether p is one of the range's ports.
func (r PortRange) Contains(p int32) bool {
	return r.Count > 0 && p >= r.First && p-r.First < r.Count
}

// AllocatePorts gives each node of want a kubelet port of r. A node keeps the port it advertises
// (held: its Node object says it, so every replica serves it there and a restart changes
// nothing); a port advertised by two nodes stays with the first by name, as every replica
// serves it. The others get the lowest port no node holds, in the order of their names; a node
// the range has no port left for gets 0 (it serves no kubelet API until one is free).
//
// held is every virtual node's advertised port, including nodes not in want (a secondary away
// keeps its node, and its port).
func AllocatePorts(held map[string]int32, want []string, r PortRange) map[string]int32 {
	taken := map[int32]string{}
	for _, name := range slices.Sorted(maps.Keys(held)) {
		if p := held[name]; r.Contains(p) {
			if _, dup := taken[p]; !dup {
				taken[p] = name
			}
		}
	}
	out := make(map[string]int32, len(want))
	var rest []string
	for _, name := range want {
		if p := held[name]; r.Contains(p) && taken[p] == name {
			out[name] = p
			continue
		}
		rest = append(rest, name)
	}
	slices.Sort(rest)
	next := r.First
	for _, name := range rest {
		for ; r.Contains(next); next++ {
			if _, ok := taken[next]; !ok {
				break
			}
		}
		if !r.Contains(next) {
			out[name] = 0
			continue
		}
		taken[next] = name
		out[name] = next
		next++
	}
	return out
}

// AdvertisedPorts are the kubelet ports the virtual nodes of a list advertise, by node name.
func AdvertisedPorts(nodes []corev1.Node) map[string]int32 {
	out := make(map[string]int32, len(nodes))
	for _, n := range nodes {
		out[n.Name] = n.Status.DaemonEndpoints.KubeletEndpoint.Port
	}
	return out
}
