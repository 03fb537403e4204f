// Package reflect copies what a delegate needs into its secondary before the delegate is created:
// the ConfigMaps and Secrets it references (volumes, projected sources, env, envFrom, image pull
// secrets) and its ServiceAccount. Copies carry flotilla.dev/primary, flotilla.dev/owner=reflect
// and the FlotillaPrimary owner reference. Never copied: kube-root-ca.crt, ServiceAccount token
// Secrets, the default ServiceAccount. A missing optional reference never blocks.
//
// Secrets are written without ever being read in the secondary (Flotilla's identity there has no
// get on Secrets): created, or applied server-side when they exist. The admission policy installed
// by `flotillactl cluster join` refuses Flotilla's updates of objects that do not carry its label,
// so a user's own Secret of the same name is never overwritten.
package dependency
