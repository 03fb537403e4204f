package eventwriter

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
)

func TestOnceReasonsAreWrittenWithoutTheRecordersCacheAndOthersGoOn(t *testing.T) {
	cs := fake.NewClientset()
	next := events.NewFakeRecorder(10)
	r := New(next, cs.EventsV1(), scheme.Scheme, "flotilla", "flotilla-manager-0", logr.Discard(), "DelegateCreated")
	go func() { _ = r.Start(t.Context()) }()

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "u1"}}
	r.Eventf(pod, nil, corev1.EventTypeNormal, "DelegateCreated", "Create", "Delegate created in cluster %s", "east")
	r.Eventf(pod, nil, corev1.EventTypeWarning, "NoClusterFits", "Wait", "Waiting for room")

	deadline := time.Now().Add(5 * time.Second)
	for {
		list, err := cs.EventsV1().Events("shop").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 1 {
			ev := list.Items[0]
			if ev.Reason != "DelegateCreated" || ev.Note != "Delegate created in cluster east" || ev.Action != "Create" || ev.Type != corev1.EventTypeNormal ||
				ev.Regarding.Name != "web" || ev.Regarding.UID != "u1" || ev.Regarding.Kind != "Pod" ||
				ev.ReportingController != "flotilla" || ev.ReportingInstance != "flotilla-manager-0" || ev.Series != nil {
				t.Fatalf("the Event written: %+v", ev)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Events written, want the DelegateCreated one", len(list.Items))
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case got := <-next.Events:
		if got != "Warning NoClusterFits Waiting for room" {
			t.Fatalf("the recorder that folds repeats got %q", got)
		}
	case <-time.After(time.Second):
		t.Fatal("an Event of another reason did not reach the recorder that folds repeats")
	}
	if len(next.Events) != 0 {
		t.Fatal("the DelegateCreated Event went to the recorder that keeps it 6 minutes")
	}
}
