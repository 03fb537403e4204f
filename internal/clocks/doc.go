// Package clocks is the one way Flotilla's components default the clock they are given: a nil
// clock is the real one. Components take a clock.PassiveClock (k8s.io/utils/clock) so that tests
// move time themselves.
package clocks
