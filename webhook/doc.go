// Package webhook is Flotilla's mutating admission webhook: it turns a pod annotated
// flotilla.dev/elect (in a namespace labelled flotilla.dev/enabled=true) into a proxy pod that the
// primary's own scheduler binds to the virtual node of a feasible secondary.
//
// The mutation is the pure function Mutate, table-tested; Handler adapts it to admission requests
// with the secondaries' nodes read from the cluster registry's caches.
package webhook
