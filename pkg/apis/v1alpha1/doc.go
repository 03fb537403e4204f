// Package v1alpha1 holds Flotilla's API types, group flotilla.dev, version v1alpha1:
// ClusterDetector (one per registered cluster, in the primary's flotilla-system namespace) and
// FlotillaPrimary (cluster-scoped, in each secondary: the owner of everything a primary creates
// there). CRDs and deep copies are generated from these files by controller-gen (`make generate`).
//
// +kubebuilder:object:generate=true
// +groupName=flotilla.dev
package v1alpha1
