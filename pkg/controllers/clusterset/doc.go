// Package clusterset writes each ClusterSet's status: the registered secondaries in it now, and
// whether it resolves (its selector parses, the clusters it names are registered). What a set
// means for a namespace is placement's (placement.Tenancy); this package only shows it, so that
// `kubectl get clustersets` says which clusters a team may use.
package clusterset
