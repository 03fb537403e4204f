package eventwriter

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	eventsclient "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"
)

const (
	// writers write Events side by side: one create takes 0.1-0.2 s of an API server under a
	// burst, and a burst of elected pods makes one Event each (one writer kept up with 6 % of a
	// burst of 10,000; client-go's recorder writes each Event on a goroutine of its own).
	writers = 16
	// queued bounds the Events waiting to be written: past it an Event is dropped and logged,
	// never waited for by a reconcile.
	queued = 5000
	// tries and retryAfter: an Event the API server could not take now is tried again.
	tries      = 3
	retryAfter = time.Second
)

// Recorder is an events.EventRecorder: Events of Once's reasons are written by its own workers
// (Start), without a cache; every other Event goes to Next, which folds repeats into series.
type Recorder struct {
	Next events.EventRecorder
	// Once are the reasons an object gets at most once.
	Once map[string]bool
	// Client writes the Events; Scheme makes their references.
	Client eventsclient.EventsV1Interface
	Scheme *runtime.Scheme
	// Controller and Instance say who reports (reportingController, reportingInstance).
	Controller, Instance string
	Log                  logr.Logger

	pending chan *eventsv1.Event
}

var _ events.EventRecorder = (*Recorder)(nil)

// New is a Recorder ready for Eventf (Start writes what it queues).
func New(next events.EventRecorder, client eventsclient.EventsV1Interface, scheme *runtime.Scheme, controller, instance string, log logr.Logger, once ...string) *Recorder {
	r := &Recorder{Next: next, Client: client, Scheme: scheme, Controller: controller, Instance: instance, Log: log,
		Once: map[string]bool{}, pending: make(chan *eventsv1.Event, queued)}
	for _, reason := range once {
		r.Once[reason] = true
	}
	return r
}

// Eventf records an Event: queued for the workers when its reason is one of Once, else Next's.
func (r *Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if !r.Once[reason] {
		r.Next.Eventf(regarding, related, eventtype, reason, action, note, args...)
		return
	}
	ev, err := r.event(regarding, related, eventtype, reason, action, fmt.Sprintf(note, args...), time.Now())
	if err != nil {
		r.Log.Error(err, "Cannot make an Event", "reason", reason)
		return
	}
	select {
	case r.pending <- ev:
	default:
		r.Log.Info("Dropped an Event: too many are waiting to be written", "reason", reason, "object", ev.Regarding.Name)
	}
}

// event is the Event client-go's recorder would make (a single one: no series).
func (r *Recorder) event(regarding, related runtime.Object, eventtype, reason, action, note string, now time.Time) (*eventsv1.Event, error) {
	ref, err := reference.GetReference(r.Scheme, regarding)
	if err != nil {
		return nil, fmt.Errorf("referring to the Event's object: %w", err)
	}
	var relatedRef *corev1.ObjectReference
	if related != nil {
		if relatedRef, err = reference.GetReference(r.Scheme, related); err != nil {
			relatedRef = nil // as client-go's recorder: the Event without it
		}
	}
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: util.GenerateEventName(ref.Name, now.UnixNano()), Namespace: ns},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: r.Controller,
		ReportingInstance:   r.Instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Related:             relatedRef,
		Note:                note,
		Type:                eventtype,
	}, nil
}

// Start writes the queued Events until ctx ends. Every replica runs it (an Event may come from
// any), so it does not wait for the leader's election.
func (r *Recorder) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case ev := <-r.pending:
					r.write(ctx, ev)
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// NeedLeaderElection says Start runs on every replica.
func (r *Recorder) NeedLeaderElection() bool { return false }

// write creates one Event, trying again a little later when the API server could not take it.
func (r *Recorder) write(ctx context.Context, ev *eventsv1.Event) {
	for try := 1; ; try++ {
		_, err := r.Client.Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
		switch {
		case err == nil, apierrors.IsAlreadyExists(err), apierrors.IsNotFound(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
			return
		case apierrors.IsInvalid(err), apierrors.IsForbidden(err), try >= tries:
			r.Log.Error(err, "Cannot write an Event", "reason", ev.Reason, "object", ev.Regarding.Name)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryAfter):
		}
	}
}
