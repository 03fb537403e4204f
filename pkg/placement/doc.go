// Package placement owns every judgement of where an elected pod may go, for the webhook, the
// proxy reconciler, the rebalancer, the volume controller and flotillactl alike: pure functions
// over the clusters as they are seen (ClusterView, NodeView, ClaimView), no I/O.
//
//   - view.go: the views, and the facts read off a virtual node (WithVirtualNode, NodeReady,
//     FailoverTainted, UnreachableFor).
//   - choose.go: the clusters a pod chose (flotilla.dev/clusters, cluster-selector,
//     cluster-weights: Chosen, Weights, ClusterWeights) and its spread over clusters.
//   - fit.go: the clusters it fits now, those it waits for, and why none fits (per cluster and per
//     node), the data of its claims deciding.
//   - decide.go: the whole decision at admission (Decide), Refit of a gated proxy, the next
//     cluster of a weighted split (WeightedNext), the random choice by free CPU.
//   - proxy.go: what a proxy carries: its failover bound and tolerations, the constraints kept
//     for its delegate, the data cluster of its claims, and every Rejection text.
//   - devices.go: device claims (DRA) judged per node by Kubernetes' allocator
//     (k8s.io/dynamic-resource-allocation) over a cluster's DeviceView, the reasons (what one node
//     could give at most), the devices per class (CountDevices).
//   - gang.go: a gang's members (GangOf) placed as one (PlaceGang): the cluster whose nodes take
//     every member together, or why none does, per cluster.
//   - split.go, rebalance.go: a controller's split over clusters and the moves to it (Plan),
//     planned over the views (Rebalance).
//
// The views are gathered by pkg/clusters/views in the manager, and from the virtual nodes by
// flotillactl (NodesUnknown: no node detail there).
package placement
