// Package registration is the reconciler of the registration Secret
// (flotilla-system/kubeconfig, key config): every change is handed to the cluster registry, which
// adds, restarts or removes secondaries live. It runs on every replica, not only the leader: each
// replica's webhook and kubelet API read their own registry.
package registration
