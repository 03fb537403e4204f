// Package replicator is the Replicator controller: it applies a Replicator's resources (plumber's
// ConfigMap, Deployment, Service, Ingress, TLS Secrets, and further manifests) with server-side
// apply to the primary and then to every target cluster in parallel, each bounded by its own
// timeout (with spec.rollout, wave by wave, a wave that is not healthy holding the later ones),
// judges the health of what it applied in each cluster, repairs drift from watches in every
// cluster, and removes what it applied when the Replicator goes. What is applied where, the order
// of the waves and what counts as healthy are decided by pure functions (replication.Desired,
// Resolve, Waves, DeploymentHealth, ServiceHealth, IngressHealth, CertificateHealth, StatusHealth).
// A kind of resources is written where the cluster serves it and lets Flotilla write it (kinds.go);
// with replicateCRDs, a custom kind's definition is applied first.
package replicator
