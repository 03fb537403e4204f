// Package views gathers what placement judges by (placement.ClusterView): each usable
// secondary's health, labels and nodes with their free resources, from the cluster registry's
// snapshots, and its virtual node's cordon, taints, failover taint and drain mark, from the
// primary's cache. The webhook, the proxy reconciler, the rebalancer and the volume controller
// read the same views through one Gatherer, and judge with pkg/placement.
package views
