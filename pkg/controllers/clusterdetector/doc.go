// Package clusterdetector reconciles ClusterDetectors: one per registered cluster, the primary
// included, showing what the cluster registry (package clusters) knows of it. The registry owns
// the connections and the health; this package only writes what it sees, through a pure status
// setter, and deletes the ClusterDetector of a cluster that is no longer registered.
package clusterdetector
