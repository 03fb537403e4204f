package delegates

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestDeletedDelegatesProveOnlyAWatchDeletionOfThatProxysDelegate(t *testing.T) {
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	delegate := func(name, proxyUID string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, Labels: map[string]string{flotillav1.LabelPrimary: "id"}}}
		if proxyUID != "" {
			p.Annotations = map[string]string{flotillav1.AnnotationProxyUID: proxyUID}
		}
		return p
	}
	d := &deletedDelegates{now: func() time.Time { return now }}
	d.onDelete(delegate("web-1", "p1"))
	d.onDelete(cache.DeletedFinalStateUnknown{Key: "demo/web-2", Obj: delegate("web-2", "p2")})
	d.onDelete(delegate("web-3", ""))
	d.onDelete(delegate("web-4", "p4"))
	if d.seen("demo", "web-1", "other") {
		t.Error("a deletion proves nothing for another proxy of the same name")
	}
	if !d.seen("demo", "web-1", "p1") {
		t.Error("the watch's deletion of the proxy's delegate is not remembered")
	}
	if d.seen("demo", "web-1", "p1") {
		t.Error("the proof is used once")
	}
	if d.seen("demo", "web-2", "p2") {
		t.Error("a relist's tombstone was taken as a proof")
	}
	if d.seen("demo", "web-3", "") {
		t.Error("a pod without its proxy's UID was remembered")
	}
	now = now.Add(deletedDelegatesKept)
	if d.seen("demo", "web-4", "p4") {
		t.Error("a deletion is remembered past deletedDelegatesKept")
	}
	d.onDelete(delegate("web-5", "p5")) // prunes what is older than deletedDelegatesKept
	if _, ok := d.byKey["demo/web-4"]; ok || len(d.byKey) != 1 {
		t.Errorf("old records not pruned: %v", d.byKey)
	}
	// A delegate relabelled in the secondary leaves the label-selected watch with a DELETED event
	// while it still runs (seen: a StatefulSet identity ran twice): no proof.
	relabelled := delegate("db-0", "p6")
	delete(relabelled.Labels, flotillav1.LabelPrimary)
	d.onDelete(relabelled)
	if d.seen("demo", "db-0", "p6") {
		t.Error("a delegate that only lost its label was taken as deleted")
	}
	var none *deletedDelegates
	if none.seen("demo", "web-5", "p5") {
		t.Error("a secondary without a delegate watch proves nothing")
	}
}
