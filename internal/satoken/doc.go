// Package satoken reads the claims of a Kubernetes ServiceAccount token (a JWT) that Flotilla
// acts on: when it was issued and expires, whose it is, and the object it is bound to. It checks
// no signature: a token is read only after an API server has accepted it (a TokenRequest's
// answer, a TokenReview), or to know when to renew one.
package satoken
