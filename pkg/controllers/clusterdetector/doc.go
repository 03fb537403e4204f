// Package clusterdetector owns the ClusterDetectors: one per registered cluster, the primary
// included, so that users read with kubectl what the cluster registry (package clusters) knows of
// it. The registry owns the connections and the health; this package only writes what it sees,
// through a pure status setter, and deletes the ClusterDetector of a cluster no longer registered.
package clusterdetector
