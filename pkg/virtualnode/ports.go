package virtualnode

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-dev/flotilla/internal/kubeletports"
)

// PortRange is where the virtual nodes' kubelet ports come from (kubeletports.Range).
type PortRange = kubeletports.Range

// AllocatePorts gives each node of want a kubelet port of r. A node keeps the port it advertises
// (held: its Node object says it, so every replica serves it there and a restart changes
// nothing); a port advertised by two nodes stays with the first by name, as every replica
// serves it. The others get the lowest port no node holds, in the order of their names; a node
// the range has no port left for gets 0 (it serves no kubelet API until one is free).
//
// held is every virtual node's advertised port, including nodes not in want (a secondary away
// keeps its node, and its port).
func AllocatePorts(held map[string]int32, want []string, r PortRange) map[string]int32 {
	taken := kubeletports.Holders(held, r)
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
