package ssa

import (
	"testing"
	"time"
)

func TestLedgerSkipsOnlyWhatIsStillAsApplied(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	var l Ledger
	if l.Unchanged("k", "h1", "5", true, t0, time.Hour) {
		t.Fatal("never applied: must apply")
	}
	l.Record("k", "h1", "5", t0)
	for _, tc := range []struct {
		name     string
		hash     string
		liveRV   string
		readable bool
		at       time.Time
		want     bool
	}{
		{"as applied", "h1", "5", true, t0.Add(time.Hour), true},
		{"desired changed", "h2", "5", true, t0, false},
		{"someone changed it (drift)", "h1", "6", true, t0, false},
		{"deleted", "h1", "", true, t0, false},
		{"unreadable, applied recently", "h1", "", false, t0.Add(59 * time.Minute), true},
		{"unreadable, applied an hour ago", "h1", "", false, t0.Add(time.Hour), false},
		{"unreadable, desired changed", "h2", "", false, t0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := l.Unchanged("k", tc.hash, tc.liveRV, tc.readable, tc.at, time.Hour); got != tc.want {
				t.Errorf("Unchanged = %t, want %t", got, tc.want)
			}
		})
	}
	l.Forget("k")
	if l.Unchanged("k", "h1", "5", true, t0, time.Hour) {
		t.Error("forgotten: must apply")
	}
	if h1, _ := Hash(map[string]any{"a": 1}); h1 == "" {
		t.Error("empty hash")
	}
}
