// Package replicator is the Replicator controller: it applies a Replicator's resources (plumber's
// ConfigMap, Deployment, Service, Ingress, TLS Secrets, and further manifests) with server-side
// apply to the primary and then to every target cluster in parallel, each bounded by its own
// timeout, repairs drift from watches in every cluster, and removes what it applied when the
// Replicator goes. What is applied where is decided by pure functions (Desired, Resolve).
package replicator
