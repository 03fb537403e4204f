package allowance

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestWantedUntil(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ns := func(v string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{flotillav1.AnnotationAllowanceWanted: v}}}
	}
	for _, tc := range []struct {
		name, at string
		want     bool
		until    time.Time
	}{
		{"a minute ago: still wanting", now.Add(-time.Minute).Format(time.RFC3339), true, now.Add(time.Minute)},
		{"three minutes ago: lapsed", now.Add(-3 * time.Minute).Format(time.RFC3339), false, time.Time{}},
		{"ahead of this clock: counted from now", now.Add(time.Hour).Format(time.RFC3339), true, now.Add(wantedFor)},
		{"not a date", "soon", false, time.Time{}},
	} {
		until, ok := wantedUntil(ns(tc.at), now)
		if ok != tc.want || (ok && !until.Equal(tc.until)) {
			t.Errorf("%s: %v %v, want %v %v", tc.name, until, ok, tc.until, tc.want)
		}
	}
}
