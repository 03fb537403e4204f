// Package translate holds the pure functions between a proxy pod in the primary and its delegate
// in a secondary: Delegate builds the delegate by an explicit allow-list (what is not named is
// not copied), ProxyStatus grafts the delegate's status onto the proxy's. No client, no I/O.
package translate
