package proxy

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// A kubelet records two Events of reason Failed for an image it cannot pull ("Failed to pull
// image X: ..." then "Error: ErrImagePull"). Shown on the proxy through an events.k8s.io recorder,
// which merges one object's Events of one reason and action into one series keeping the first
// note, the one naming the image was lost whenever the other came first (seen in e2e). Each
// forwarded Event names its origin, so both stay.
func TestForwardedEventsOfOneReasonStayApart(t *testing.T) {
	ctx := t.Context()
	cs := k8sfake.NewClientset()
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	b.StartRecordingToSink(ctx.Done())
	defer b.Shutdown()

	delegate := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "absent", UID: "d1", ResourceVersion: "5"},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	at := metav1.NewTime(time.Now())
	kubelet := func(name, msg string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name, UID: types.UID("uid-" + name)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "web", Name: "absent", UID: "d1"},
			Type:           corev1.EventTypeWarning, Reason: "Failed", Message: msg, Count: 1, FirstTimestamp: at, LastTimestamp: at}
	}
	// Listed by name: the Error first.
	secondary := fake.NewClientBuilder().WithObjects(kubelet("absent.a", "Error: ErrImagePull"),
		kubelet("absent.b", `Failed to pull image "registry.invalid/absent:1": not found`)).
		WithIndex(&corev1.Event{}, "involvedObject.uid", func(o client.Object) []string {
			return []string{string(o.(*corev1.Event).InvolvedObject.UID)}
		}).Build()
	clock := clocktesting.NewFakeClock(time.Now())
	r := &Reconciler{Recorder: b.NewRecorder(scheme.Scheme, "flotilla"), Clock: clock}
	proxy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "absent", UID: "p1", ResourceVersion: "9"}}
	sec := clusters.Secondary{Name: "east", Client: secondary}
	r.forwardEvents(ctx, sec, proxy, delegate)
	clock.Step(eventLookAgain)
	r.forwardEvents(ctx, sec, proxy, delegate)

	var notes []string
	deadline := time.Now().Add(5 * time.Second)
	for len(notes) < 2 && time.Now().Before(deadline) {
		list, err := cs.EventsV1().Events("web").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		notes = notes[:0]
		for _, e := range list.Items {
			notes = append(notes, e.Note)
		}
		time.Sleep(50 * time.Millisecond)
	}
	joined := strings.Join(notes, "\n")
	if !strings.Contains(joined, "In cluster east: Error: ErrImagePull") || !strings.Contains(joined, `In cluster east: Failed to pull image "registry.invalid/absent:1"`) {
		t.Fatalf("Events on the proxy:\n%s\nwant both of the secondary's", joined)
	}
}
