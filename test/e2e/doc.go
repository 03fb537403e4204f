// Package e2e holds Flotilla's end-to-end suites (ginkgo). One suite run shares one test bed of
// real local clusters (package testbed): a primary with the manager running against it, and two
// secondaries. Run it with `make test` (or `make e2e`), which builds the bed's tools first.
//
// The suite runs in parallel Ginkgo processes (make e2e E2E_PROCS=4): the first starts the bed and
// the manager (SynchronizedBeforeSuite) and hands the others a handle to them. Groups that stop,
// freeze, cordon, drain or restart anything shared are Serial and labelled disruptive; they run on
// the first process after the others. make e2e runs the disruptive groups that need no real node
// on a second bed of their own, without real nodes (FLOTILLA_E2E_REAL_NODES=0), beside the rest;
// it starts first, and the bed with real nodes once its clusters are up (FLOTILLA_E2E_UP_MARK,
// FLOTILLA_E2E_START_AFTER): a bed without real nodes changes nothing of the host, so the two
// never meet. One outage of a secondary serves every feature that reacts
// to it alike (outage_test.go). The manager runs with the bed's pod network (flat on the default
// bed), so the flat network's specs need no restart. Fixtures shared by a feature's groups live in
// *_fixture_test.go files. docs/testbed.md lists the tiers, the labels and how to run a part.
package e2e
