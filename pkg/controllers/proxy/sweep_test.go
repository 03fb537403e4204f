package proxy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestOrphanComparesProxyUIDs(t *testing.T) {
	proxy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "current"}}
	s := &Sweeper{Proxies: fake.NewClientBuilder().WithObjects(proxy).Build()}
	delegate := func(name, proxyUID string) *corev1.Pod {
		d := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: map[string]string{}}}
		if proxyUID != "" {
			d.Annotations[flotillav1.AnnotationProxyUID] = proxyUID
		}
		return d
	}
	tests := map[string]struct {
		d    *corev1.Pod
		want bool
	}{
		"its proxy lives":        {delegate("web", "current"), false},
		"an earlier incarnation": {delegate("web", "previous"), true},
		"its proxy is gone":      {delegate("gone", "x"), true},
		"no proxy UID: not ours": {delegate("web", ""), false},
	}
	for name, tc := range tests {
		if got := s.orphan(t.Context(), tc.d); got != tc.want {
			t.Errorf("%s: orphan = %v, want %v", name, got, tc.want)
		}
	}
}
