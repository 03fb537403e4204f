// Package replication owns what a Replicator applies in one cluster: Desired, a pure function of
// the Replicator, what every cluster shares (Inputs: the primary's ID, the TLS material, the
// Overrides) and what is known of the one cluster (Place: its live Deployment's selector, an HPA,
// what its Overrides see of it). Plumber's fields become their objects (ConfigMap, TLS Secrets,
// Deployment, Service, Ingress), then resources as written; the cluster's Overrides change a
// secondary's copies; Mark puts Flotilla's labels and owner annotation on each.
//
// The Replicator controller (pkg/controllers/replicator) applies what it returns, and
// `flotillactl render replicator` prints it, so what a user sees is what is sent. It belongs to
// the pure core (docs/architecture.md): no client, no I/O.
package replication
