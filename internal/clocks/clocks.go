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
