// Package pki issues the certificates Flotilla serves with: a CA, server certificates signed by
// it, and client certificates. The webhook's serving certificate comes from here, and so does the
// Replicator's Ingress TLS: EnsureBundle decides, without I/O, which parts of a Replicator's CA,
// server and client certificates to keep, renew or rotate, and the bundle maps them to the data of
// the Secrets that hold them. Keys are ECDSA P-256; everything is returned PEM-encoded.
package pki
