// Package virtualnode runs one virtual node in the primary per usable secondary, with
// virtual-kubelet's node controller.
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
