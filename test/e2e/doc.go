// Package e2e holds Flotilla's end-to-end suites (ginkgo). One suite run shares one test bed of
// real local clusters (package testbed): a primary with the manager running against it, and two
// secondaries. Run it with `make test` (or `make e2e`), which builds the bed's tools first.
package e2e
