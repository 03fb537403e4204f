package kubeletports

import (
	"maps"
	"slices"
)

// Range is where the virtual nodes' kubelet ports come from: First, First+1, ... Count of them,
// one per virtual node. Count 0: no kubelet API (every node advertises port 0).
type Range struct {
	First, Count int32
}

// Contains says whether p is one of the range's ports.
func (r Range) Contains(p int32) bool {
	return r.Count > 0 && p >= r.First && p-r.First < r.Count
}

// Holders is which node holds each port of r that nodes advertise (advertised: each node's port,
// by name). A port advertised by two nodes stays with the first by name: every replica decides
// alike, whatever order it saw the nodes in.
func Holders(advertised map[string]int32, r Range) map[int32]string {
	out := map[int32]string{}
	for _, name := range slices.Sorted(maps.Keys(advertised)) {
		if p := advertised[name]; r.Contains(p) {
			if _, dup := out[p]; !dup {
				out[p] = name
			}
		}
	}
	return out
}
