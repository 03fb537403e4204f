// Package dependency copies what a delegate needs into its secondary and keeps the copies true.
//
// Reflector.Ensure runs in the proxy reconciler before a delegate is created: the ConfigMaps and
// Secrets it references (volumes, projected sources, env, envFrom, image pull secrets) and its
// ServiceAccount. The Reconciler (one key per copy: cluster, kind, namespace, name) then keeps
// them in sync with the primary, copies the Services and NetworkPolicies that select elected
// pods and the Ingresses whose backends are such Services (annotations kept, status not), and removes a copy no delegate in that secondary has used for its grace period. What a
// copy looks like is pkg/translate's (pure); this package does the reads and writes.
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
