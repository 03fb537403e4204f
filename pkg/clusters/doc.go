// Package clusters is the one owner of Flotilla's connections to registered clusters.
//
// The registration Secret (flotilla-system/kubeconfig, key config) is a kubeconfig whose every
// context is a cluster. A Registry turns it into clients, one health-probe goroutine per cluster,
// and, for secondaries, the node and pod informers that their virtual node's capacity needs.
// Other components (the ClusterDetector reconciler, the virtual nodes) read Snapshots from it and
// subscribe to its changes; none of them dials a secondary on its own.
//
// # Usage
//
//	reg := clusters.NewRegistry(clusters.Options{PrimaryID: id}, log)
//	mgr.Add(reg)                                          // probes run while the manager runs
//	(&clusters.SecretReconciler{Registry: reg}).SetupWithManager(mgr)
//	for _, s := range reg.Snapshots() { ... }
//	changes := reg.Subscribe()                           // cluster names, coalesced
//
// # Implementation considerations
//
//   - A Secret that does not parse keeps the last good configuration in force and is reported
//     (Snapshot of the registry: ConfigError); it never removes clusters.
//   - Each cluster is probed on its own goroutine with its own timeout, so a hung or dead cluster
//     never delays another. A cluster is Unknown after FailureThreshold failed probes in a row,
//     Running again after one good probe.
//   - A cluster's identity is the UID of its kube-system namespace. The primary's own context
//     becomes the primary (no virtual node); a second context for a cluster already registered is
//     refused (DuplicateCluster).
//   - A change of a context's token alone never restarts its connection: the token is read per
//     request, so renewing it costs nothing.
//   - Cluster names are DNS-1123 labels derived from context names (ClusterName).
package clusters
