package proxy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestStrayDecision(t *testing.T) {
	now := metav1.Now()
	pod := func(edit func(p *corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{}}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
		edit(p)
		return p
	}
	tests := map[string]struct {
		pod  *corev1.Pod
		want strayAction
	}{
		"a proxy: the proxy reconciler's": {pod(func(p *corev1.Pod) { p.Labels[flotillav1.LabelProxy] = "true" }), strayNothing},
		"a terminating proxy: still the proxy reconciler's": {pod(func(p *corev1.Pod) {
			p.Labels[flotillav1.LabelProxy] = "true"
			p.DeletionTimestamp = &now
		}), strayNothing},
		"a stray, unmarked":       {pod(func(*corev1.Pod) {}), strayMark},
		"a stray, marked already": {pod(func(p *corev1.Pod) { p.Status.Reason = flotillav1.ReasonNotElected }), strayNothing},
		"a stray being deleted":   {pod(func(p *corev1.Pod) { p.DeletionTimestamp = &now }), strayRelease},
		"a marked stray being deleted": {pod(func(p *corev1.Pod) {
			p.Status.Reason = flotillav1.ReasonNotElected
			p.DeletionTimestamp = &now
		}), strayRelease},
		"a stray someone set Failed: left as it is": {pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), strayNothing},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := strayDecision(tt.pod); got != tt.want {
				t.Errorf("strayDecision = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNotProxySelector(t *testing.T) {
	for set, want := range map[string]bool{"": true, "flotilla.dev/proxy=false": true, "flotilla.dev/proxy=true": false} {
		l, err := labels.ConvertSelectorToLabelsMap(set)
		if err != nil {
			t.Fatal(err)
		}
		if got := notProxy.Matches(l); got != want {
			t.Errorf("notProxy.Matches(%q) = %v, want %v", set, got, want)
		}
	}
}
