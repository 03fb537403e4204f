// Package mcs decides what the Multi-Cluster Services API (KEP-1645) makes of one Service
// exported in the clusters of a ClusterSet: the ServiceImport every cluster gets, the conditions
// of each ServiceExport, and the EndpointSlices each exporting cluster contributes. It is pure:
// the controller (pkg/controllers/mcs) gathers every cluster's ServiceExport, Service and
// EndpointSlices and applies what this package returns, so each rule of the KEP is a table test.
//
// The rules, from the KEP's "Constraints and Conflict Resolution":
//   - An export is valid when its Service exists and is not of type ExternalName.
//   - The oldest valid export (creation time, then cluster name) wins every property that cannot
//     be merged: headlessness, session affinity and its config, internal traffic policy, traffic
//     distribution, exported labels and annotations (taken whole, never merged).
//   - Ports are the union of the exported Services' ports, merged by name, then by protocol and
//     port; a port that contradicts one already taken (older export) is left out, and only the
//     clusters that expose a port of the import are its endpoints for it.
//   - Any difference raises Conflict on every valid export, with the fields and the winner.
//
// It belongs to the pure core (docs/architecture.md): it imports only API types.
package mcs
