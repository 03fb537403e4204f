// Package registration reconciles the registration Secret (flotilla-system/kubeconfig, key
// config), the one input that says which secondaries exist: every change is handed to the cluster
// registry, which adds, restarts or removes secondaries live, with no restart of the manager. It
// runs on every replica, not only the leader: each replica's webhook and kubelet API read their own
// registry.
package registration
