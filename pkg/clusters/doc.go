// Package clusters is the one owner of Flotilla's connections to registered clusters.
//
// The registration Secret (flotilla-system/kubeconfig, key config) is a kubeconfig whose every
// context is a cluster. A Registry turns it into clients, one health-probe goroutine per cluster,
// each secondary's capacity (what its virtual node offers and the webhook places by), and the
// informers controllers ask for. It knows connections, identity, health and capacity; it knows no
// feature's kinds. A controller describes what it follows in secondaries as a Watch (kind, label
// selector, what its cache keeps) and gets a controller-runtime source of it (Source, StartSource;
// ClusterSource for cluster-state changes) in its SetupWithManager, as cluster-api's cluster cache
// hands out watches; the registry runs one informer per Watch per secondary, and reads of it go
// through Secondary.Cached. No component dials a secondary or starts an informer there on its own.
//
// # Usage
//
//	reg := clusters.NewRegistry(clusters.Options{PrimaryID: id}, log)
//	mgr.Add(reg)                                          // probes run while the manager runs
//	(&registration.Reconciler{Registry: reg}).SetupWithManager(ctx, mgr, controller.Options{}) // feeds the Secret
//	for _, s := range reg.Snapshots() { ... }
//	ctrl.NewControllerManagedBy(mgr).For(&corev1.Pod{}).
//		WatchesRawSource(reg.Source(delegates.Watch, &handler.EnqueueRequestForObject{}))
//
// # Implementation considerations
//
//   - A Secret that does not parse keeps the last good configuration in force and is reported
//     (Snapshot of the registry: ConfigError); it never removes clusters.
//   - Each cluster is probed on its own goroutine with its own timeout, so a hung or dead cluster
//     never delays another. A cluster is Unknown after FailureThreshold failed probes in a row,
//     Running again after one good probe.
//   - With its identity and version, a cluster's discovery is read for the APIs Flotilla uses
//     that not every cluster serves (Features; Snapshot.MissingFeatures), never its version string.
//   - Beside its capacity, a secondary's devices (DRA) are watched once a list of its
//     DeviceClasses succeeds (devices_watch.go): its classes, its ResourceSlices, and of its
//     ResourceClaims only the devices they hold; Capacity.Devices is what placement's allocator
//     reads, Capacity.DeviceCounts what its ClusterDetector and virtual node show.
//   - A cluster's identity is the UID of its kube-system namespace. The primary's own context
//     becomes the primary (no virtual node); a second context for a cluster already registered is
//     refused (DuplicateCluster).
//   - A change of a context's token alone never restarts its connection: the token is read per
//     request, so renewing it costs nothing.
//   - Cluster names are DNS-1123 labels derived from context names (ClusterName).
//   - Sources never block an informer and never drop an event: a source's handler only adds to
//     its controller's work queue (which coalesces). A source starts with its controller, so a
//     standby replica registers no handler and buffers nothing. A source started late is replayed
//     what the informers hold; informers restarted after an outage get every source's handler.
//   - One home for shared concepts: ClusterID (kube-system UID), the registration Secret's one
//     read-modify-write (UpdateRegistration, used by the CLI and the token renewal),
//     EnsureManagedNamespace (proxy and Replicator reconcilers), VirtualNodeLabels (virtual node
//     manager and webhook).
package clusters
