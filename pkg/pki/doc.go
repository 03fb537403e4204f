// Package pki issues the certificates Flotilla serves with: a CA, server certificates signed by
// it, and client certificates. The webhook's serving certificate comes from here, and so will the
// Replicator's Ingress TLS. Keys are ECDSA P-256; everything is returned PEM-encoded.
package pki
