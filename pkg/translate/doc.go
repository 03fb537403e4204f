// Package translate owns what a proxy pod in the primary becomes in a secondary: Delegate builds
// the delegate by an explicit allow-list (what is not named is not copied), ProxyStatus grafts the
// delegate's status onto the proxy's, and the constraints, copies and dependencies a delegate takes
// are computed here. It is the pure core, apart so that these decisions are table-tested without a
// cluster: of this module it imports only pkg/apis; no client, no I/O.
package translate
