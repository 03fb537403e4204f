// Package clocks is the one way Flotilla's components default the clock they are given: a nil
// clock is the real one. Components take a clock.PassiveClock (k8s.io/utils/clock) so that tests
// move time themselves.
package clocks

import (
	"time"

	"k8s.io/utils/clock"
)

// Now is c's time, or the real time when c is nil.
func Now(c clock.PassiveClock) time.Time {
	if c == nil {
		return time.Now()
	}
	return c.Now()
}
