package ssa

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// A Deployment's status moves its resourceVersion while nothing of what was applied changed: no
// new apply for that (with real containers, a Deployment's status moves for minutes). A change of
// its spec (generation), labels or annotations, or another object of that name, is drift.
func TestVersionIgnoresStatusOnlyChanges(t *testing.T) {
	applied := &metav1.ObjectMeta{UID: "u1", ResourceVersion: "10", Generation: 2,
		Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "1"}}
	with := func(edit func(m *metav1.ObjectMeta)) *metav1.ObjectMeta {
		m := applied.DeepCopy()
		edit(m)
		return m
	}
	for _, tc := range []struct {
		name  string
		live  *metav1.ObjectMeta
		drift bool
	}{
		{"as applied", with(func(*metav1.ObjectMeta) {}), false},
		{"its status updated (resourceVersion only)", with(func(m *metav1.ObjectMeta) { m.ResourceVersion = "11" }), false},
		{"its spec edited", with(func(m *metav1.ObjectMeta) { m.ResourceVersion, m.Generation = "12", 3 }), true},
		{"a label edited", with(func(m *metav1.ObjectMeta) { m.ResourceVersion, m.Labels = "13", map[string]string{"app": "other"} }), true},
		{"an annotation added", with(func(m *metav1.ObjectMeta) { m.ResourceVersion, m.Annotations["b"] = "14", "2" }), true},
		{"deleted and made again", with(func(m *metav1.ObjectMeta) { m.UID, m.ResourceVersion = "u2", "15" }), true},
	} {
		if got := Version(tc.live) != Version(applied); got != tc.drift {
			t.Errorf("%s: drift %v, want %v", tc.name, got, tc.drift)
		}
	}
	// Without a generation (a ConfigMap), every change of its resourceVersion counts.
	cm := &metav1.ObjectMeta{UID: "c", ResourceVersion: "5"}
	if Version(cm) != "5" || Version(&metav1.ObjectMeta{UID: "c", ResourceVersion: "6"}) == Version(cm) {
		t.Errorf("an object without a generation is versioned by its resourceVersion: %q", Version(cm))
	}
}
