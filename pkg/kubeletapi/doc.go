// Package kubeletapi owns the kubelet API of Flotilla's virtual nodes. `kubectl logs`, `exec`,
// `attach` and `port-forward` reach a pod through its node's kubelet, and a virtual node has none:
// this authenticated stream proxy takes them from a proxy pod in the primary to its delegate in the
// secondary. It is not node lifecycle (package virtualnode): every virtual node advertises the same
// address, every replica of the manager serves it, and it holds no state but its serving
// certificate and caches.
//
// Callers are authenticated by client certificate (the API server's, against the cluster's client
// CA) or bearer token (TokenReview), then authorised by SubjectAccessReview. Anonymous callers are
// refused.
//
// # Implementation considerations
//
// Anyone who reaches a node address can call it, so what a caller costs the primary is bounded:
// reviews are cached as a kubelet caches them (keyed by a digest, never a token), a direct caller
// is authorised before the proxy is read, at most Server.MaxInFlight requests wait on a review
// (429 past that), and all of it goes through a client of its own (NewPrimaryClient), never the
// one that renews the virtual nodes' Leases.
package kubeletapi
