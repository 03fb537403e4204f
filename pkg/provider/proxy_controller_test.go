package provider

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRemainingGrace(t *testing.T) {
	now := time.Unix(1000, 0)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	thirty := int64(30)
	tests := map[string]struct {
		pod  corev1.Pod
		want int64
	}{
		"not deleted":              {pod: corev1.Pod{}, want: corev1.DefaultTerminationGracePeriodSeconds},
		"deleted just now":         {pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: at(30 * time.Second), DeletionGracePeriodSeconds: &thirty}}, want: 30},
		"deadline passed long ago": {pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: at(-2 * time.Minute), DeletionGracePeriodSeconds: &thirty}}, want: 0},
	}
	for name, tc := range tests {
		if got := remainingGrace(&tc.pod, now); got != tc.want {
			t.Errorf("%s: %d, want %d", name, got, tc.want)
		}
	}
}
