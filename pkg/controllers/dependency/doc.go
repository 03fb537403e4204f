// Package dependency keeps the copies of what delegates need in their secondaries true to the
// primary, and removes those no delegate uses any more.
//
// pkg/copies makes the first copies, before a delegate is created (Reflector.Ensure, in the proxy
// reconciler): the ConfigMaps and Secrets it references (volumes, projected sources, env,
// envFrom, image pull secrets) and its ServiceAccount. The Reconciler (one key per copy: cluster,
// kind, namespace, name) then keeps them in sync with the primary, copies the Services and
// NetworkPolicies that select elected pods and the Ingresses whose backends are such Services
// (annotations kept, status not), and removes a copy no delegate in that secondary has used for
// its grace period. The kinds, how each is read and used and what its copy looks like are
// translate.DependencyKinds (pure); this package does the reads, pkg/copies the writes.
//
// Copies carry flotilla.dev/primary, flotilla.dev/owner=reflect and the FlotillaPrimary owner
// reference. Never copied: kube-root-ca.crt, ServiceAccount token Secrets, the default
// ServiceAccount. A missing optional reference never blocks.
//
// Secrets are written without ever being read in the secondary (Flotilla's identity there has no
// get on Secrets): created, or applied server-side when they exist. The admission policy installed
// by `flotillactl cluster join` refuses Flotilla's updates of objects that do not carry its label,
// so a user's own Secret of the same name is never overwritten.
package dependency
