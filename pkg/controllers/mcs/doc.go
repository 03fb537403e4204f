// Package mcs is Flotilla's controller of the Multi-Cluster Services API (KEP-1645) for the
// ClusterSet of the primary and its secondaries: a ServiceExport in any of them makes the
// ServiceImport of that name in every one, with the EndpointSlices of every exporting cluster's
// ready endpoints and, for a ClusterSetIP import, a Service without selector that gives the
// import its address there (kube-proxy forwards it to those EndpointSlices).
//
// One reconcile handles one exported name (namespace/name) across every cluster: it gathers each
// cluster's ServiceExport, Service and EndpointSlices (the primary's from the manager's cache,
// each secondary's from the registry's watches), lets pkg/mcs decide the import and the exports'
// conditions, and applies the result everywhere it can reach.
//
// Implementation considerations:
//   - A secondary that does not answer keeps what it contributed: its endpoints stay in every
//     import until it has not answered for the failover bound (--failover-after), then leave
//     them; the import itself stays while the primary's import lists it among its clusters, so
//     a restarted manager, which cannot read that secondary yet, takes no export away.
//   - Everything written carries flotilla.dev/primary=<primary ID>; an import, Service or
//     EndpointSlice of the same name without it is another implementation's or a user's, never
//     overwritten or deleted: the export says so.
//   - In a secondary, writes happen only in namespaces this primary manages (its admission
//     policy); a namespace missing there is created as Flotilla creates its namespaces.
package mcs
