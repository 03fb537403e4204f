// Package kubeletapi is the kubelet API of Flotilla's virtual nodes: an authenticated stream proxy
// that takes `kubectl logs`, `exec`, `attach` and `port-forward` on a proxy pod in the primary to
// its delegate in the secondary. It is not node lifecycle (package virtualnode): every virtual node
// advertises the same address, every replica of the manager serves it, and it holds no state but
// its serving certificate.
//
// Callers are authenticated by client certificate (the API server's, against the cluster's client
// CA) or bearer token (TokenReview), then authorised by SubjectAccessReview. Anonymous callers are
// refused.
package kubeletapi
