// Package v1alpha1 owns Flotilla's vocabulary, API group flotilla.dev: its types (ClusterDetector,
// one per registered cluster in the primary; FlotillaPrimary, in each secondary the owner of what a
// primary creates there; Replicator) and every label, annotation, finalizer, name, condition type
// and reason. It is the lowest layer and imports no other package of this module, so that every
// package can say the same thing the same way. CRDs and deep copies are generated from it
// (`make generate`).
//
// +kubebuilder:object:generate=true
// +groupName=flotilla.dev
package v1alpha1
