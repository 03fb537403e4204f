// Package uninstall owns the removal of what Flotilla's manager created at run time in the
// primary: the webhook configuration, the virtual nodes, the ClusterDetectors, the manager's
// Secrets and its leader Lease. Helm does not know these objects, so both ways out share this one
// list: `helm uninstall` (the chart's pre-delete hook runs `flotilla-manager uninstall`) and
// `flotillactl uninstall`.
//
// It never takes a user's workload down with it: while elected pods or Replicators exist it
// changes nothing and says which (their finalizers would otherwise be left with no one to honour
// them, and namespaces would hang Terminating). With Orphan it lets them go: proxies and
// Replicators lose Flotilla's finalizers, and what runs in the secondaries keeps running there.
package uninstall
