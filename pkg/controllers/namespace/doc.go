// Package namespace removes the namespaces Flotilla created in secondaries for delegates once
// the namespace of the same name is gone from the primary, unless they hold something that is not
// Flotilla's. It runs on the leader, at each deletion of a primary namespace and at a slow
// interval (for deletions while the manager was down).
package namespace
