// Package pki owns the certificates Flotilla serves with: a CA, server certificates signed by it,
// and client certificates, for the webhook, the kubelet API and a Replicator's Ingress TLS. It
// exists so that one table-tested mechanism serves in cluster and on a host alike (why not
// cert-controller: docs/architecture.md). EnsureBundle decides, without I/O, which parts of a
// Replicator's certificates to keep, renew or rotate. Keys are ECDSA P-256, all of it PEM-encoded.
package pki
