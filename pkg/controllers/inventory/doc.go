// Package inventory publishes the fleet to SIG-Multicluster's readers: each cluster's ClusterSet
// identity as KEP-2149 ClusterProperties (cluster.clusterset.k8s.io: its name in the set, the
// source-cluster of its Multi-Cluster Services endpoints; clusterset.k8s.io: the set's, this
// primary's ID), in every cluster that serves the About API (about.k8s.io); and each secondary as
// a KEP-4322 ClusterProfile (multicluster.x-k8s.io) in the primary's system namespace where that
// CRD is installed, with its health conditions, version and properties, for inventory readers
// (MultiKueue, Argo CD, OCM).
//
// Neither API's Go module is a dependency: the objects are written as unstructured, in the
// version the cluster serves, with the fields the KEPs define. A cluster without the CRD is left
// alone. A ClusterProperty that exists with another value and is not this primary's (the cluster
// belongs to another set) is never overwritten: a Warning Event on the cluster's ClusterDetector
// says so.
package inventory
