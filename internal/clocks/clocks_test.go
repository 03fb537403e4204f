package clocks

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestNow(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := Now(clocktesting.NewFakePassiveClock(at)); !got.Equal(at) {
		t.Errorf("a given clock: %s, want %s", got, at)
	}
	before := time.Now()
	if got := Now(nil); got.Before(before) || got.After(time.Now()) {
		t.Errorf("no clock: %s, want the real time", got)
	}
}
