// Package virtualnode owns the virtual Node objects of the primary: one per usable secondary, run
// by virtual-kubelet's node controller under a supervisor. They exist so that the primary's
// scheduler and users see each secondary as a node that proxy pods are bound to, whose Ready,
// capacity, labels and taints (failover included) follow the cluster registry's snapshots.
//
// # Implementation considerations
//
//   - The node's Lease and virtual-kubelet's Ping reflect the MANAGER's liveness: Ping never dials
//     the secondary. A dead manager lets the Lease lapse and the node go Unknown; a dead secondary
//     shows as Ready=False with the reason, while the Lease stays fresh.
//   - Ready, capacity and allocatable come from the cluster registry's snapshot (package clusters);
//     capacity changes are written at most every StatusInterval and only when they move by more than 1 %.
//   - virtual-kubelet sets a node's spec only when it creates the node, and its three-way status patch
//     cannot restore a label someone removed; Flotilla reconciles labels and taints itself.
//   - virtual-kubelet's node controller exits if it cannot reach the primary; a supervisor per node
//     restarts it with capped backoff.
//   - Nodes carry no kubernetes.io/os|arch labels, so system DaemonSets never target them.
package virtualnode
