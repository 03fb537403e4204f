// Package access owns what a primary may do in a secondary: the ServiceAccount Flotilla uses
// there, its least-privilege RBAC, and the ValidatingAdmissionPolicy that confines its writes to
// namespaces labelled flotilla.dev/managed-by=<primary ID>. It exists so that what is granted is
// built by pure functions, reviewed and tested in one place; `flotillactl cluster join` applies it.
// It belongs to the pure core (docs/architecture.md): of this module it imports only pkg/apis.
//
// What is granted: reads of nodes and pods (capacity, status), writes of the kinds delegates
// need (namespaces, pods, ConfigMaps, Services, ServiceAccounts, NetworkPolicies) and of Secrets
// WITHOUT get/list/watch, kubectl logs/exec/attach/port-forward into pods, its own FlotillaPrimary,
// and a token for its own ServiceAccount (renewal). Never: RBAC objects, cluster-admin, reads of
// Secrets. The rules of the kinds a Replicator writes and of the dependency copies are derived
// from their tables, v1alpha1.ReplicatedKinds and translate.DependencyKinds: a kind added to
// either is granted with it.
package access
