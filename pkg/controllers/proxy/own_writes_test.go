package proxy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestOwnWritesBringAStaleCacheUpToTheLastWriteOnly(t *testing.T) {
	proxy := func(uid types.UID, rv string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: uid, ResourceVersion: rv,
			Annotations: map[string]string{"a": rv}}, Status: corev1.PodStatus{Phase: phase}}
	}
	tests := map[string]struct {
		record     func(w *ownWrites)
		cached     *corev1.Pod
		wantDone   bool
		wantRV     string
		wantPhase  corev1.PodPhase
		wantRecord bool // still remembered after the recall
	}{
		"nothing written": {
			record: func(*ownWrites) {},
			cached: proxy("u1", "10", corev1.PodPending), wantRV: "10", wantPhase: corev1.PodPending,
		},
		"the cache has not seen the write: the write's answer": {
			record: func(w *ownWrites) {
				w.wrote(proxy("u1", "10", corev1.PodPending), proxy("u1", "11", corev1.PodRunning))
			},
			cached: proxy("u1", "10", corev1.PodPending), wantRV: "11", wantPhase: corev1.PodRunning, wantRecord: true,
		},
		"the cache shows the write or later: the cache, and the record goes": {
			record: func(w *ownWrites) {
				w.wrote(proxy("u1", "10", corev1.PodPending), proxy("u1", "11", corev1.PodRunning))
			},
			cached: proxy("u1", "12", corev1.PodFailed), wantRV: "12", wantPhase: corev1.PodFailed,
		},
		"another incarnation of the name: the cache, and the record goes": {
			record: func(w *ownWrites) {
				w.wrote(proxy("u1", "10", corev1.PodPending), proxy("u1", "11", corev1.PodRunning))
			},
			cached: proxy("u2", "10", corev1.PodPending), wantRV: "10", wantPhase: corev1.PodPending,
		},
		"let go, the cache still shows it: nothing to do": {
			record: func(w *ownWrites) { w.deleted(proxy("u1", "10", corev1.PodRunning)) },
			cached: proxy("u1", "10", corev1.PodRunning), wantDone: true, wantRV: "10", wantPhase: corev1.PodRunning, wantRecord: true,
		},
		"let go, a new pod of the same name: work on it": {
			record: func(w *ownWrites) { w.deleted(proxy("u1", "10", corev1.PodRunning)) },
			cached: proxy("u2", "20", corev1.PodPending), wantRV: "20", wantPhase: corev1.PodPending,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var w ownWrites
			tc.record(&w)
			done := w.recall(tc.cached)
			if done != tc.wantDone || tc.cached.ResourceVersion != tc.wantRV || tc.cached.Status.Phase != tc.wantPhase {
				t.Errorf("done %v, resourceVersion %s, phase %s; want %v, %s, %s", done, tc.cached.ResourceVersion, tc.cached.Status.Phase, tc.wantDone, tc.wantRV, tc.wantPhase)
			}
			if !tc.wantDone && tc.cached.Annotations["a"] != tc.wantRV {
				t.Errorf("annotations %v: want those of resourceVersion %s", tc.cached.Annotations, tc.wantRV)
			}
			_, remembered := w.m.Load(types.NamespacedName{Namespace: "ns", Name: "web-1"})
			if remembered != tc.wantRecord {
				t.Errorf("remembered %v, want %v", remembered, tc.wantRecord)
			}
		})
	}
}

func TestOwnWritesKnowTheEchoOfTheLastWrite(t *testing.T) {
	pod := func(uid types.UID, rv string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: uid, ResourceVersion: rv}}
	}
	tests := map[string]struct {
		record   func(w *ownWrites)
		event    *corev1.Pod
		wantEcho bool
	}{
		"no write":                            {record: func(*ownWrites) {}, event: pod("u1", "11")},
		"the write's own event":               {record: func(w *ownWrites) { w.wrote(pod("u1", "10"), pod("u1", "11")) }, event: pod("u1", "11"), wantEcho: true},
		"a later change":                      {record: func(w *ownWrites) { w.wrote(pod("u1", "10"), pod("u1", "11")) }, event: pod("u1", "12")},
		"another incarnation":                 {record: func(w *ownWrites) { w.wrote(pod("u1", "10"), pod("u1", "11")) }, event: pod("u2", "11")},
		"a proxy let go: its events still go": {record: func(w *ownWrites) { w.deleted(pod("u1", "10")) }, event: pod("u1", "10")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var w ownWrites
			tc.record(&w)
			if got := w.echo(tc.event); got != tc.wantEcho {
				t.Errorf("echo %v, want %v", got, tc.wantEcho)
			}
			if tc.wantEcho {
				if _, still := w.m.Load(types.NamespacedName{Namespace: "ns", Name: "web-1"}); still {
					t.Error("the record is kept after its echo: the cache has caught up")
				}
			}
		})
	}
}
