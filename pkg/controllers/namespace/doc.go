// Package namespace owns the end of the namespaces Flotilla creates in secondaries for delegates:
// once the namespace of the same name is gone from the primary, it removes them, unless they hold
// something that is not Flotilla's, so that secondaries do not collect empty namespaces. It runs on
// the leader, at each deletion of a primary namespace and at a slow interval (for deletions while
// the manager was down).
package namespace
