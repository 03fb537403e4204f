package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

const traceLong = `trace pod prints an elected pod's timeline: where it is now, why it waits, and how long each
step took.

From the primary (always): the pod's admission, its conditions (PodScheduled, Delegated,
Initialized, ContainersReady, Ready) and the Events of the pod, in order, each with the time
since the one before, then where the pod stands (its phase and, while it waits, Flotilla's
reason and message).

From the tracing backend (with --tracing-query or $FLOTILLA_TRACING_QUERY, a Jaeger query
address): the pod's trace, whose ID the webhook wrote on the pod (flotilla.dev/traceparent),
span by span: the primary's API server admitting it, the webhook, each proxy reconcile with
its outcome, the dependency copies, the delegate's creation, the status writes; and the spans
of the API servers Flotilla called (the secondary's creating the delegate), which join the
trace as linked traces (an API server parents a caller's span only for system:masters and
system:monitoring callers) and are found by their link.

-o json or -o yaml prints the same as one document (namespace, name, now, steps, traceID, spans,
traceNote), the two formats with the same fields.`

const traceExample = `  flotillactl trace pod shop/web-7d9c5b-x2x4k
  flotillactl trace pod shop/web-7d9c5b-x2x4k --tracing-query http://127.0.0.1:16686
  flotillactl trace pod shop/web-7d9c5b-x2x4k -o json
  flotillactl trace pod shop/web-7d9c5b-x2x4k -o yaml`

// traceQueryEnv names the tracing backend when --tracing-query is not given.
const traceQueryEnv = "FLOTILLA_TRACING_QUERY"

// traceBackendTimeout bounds all of trace's calls to the tracing backend.
const traceBackendTimeout = 20 * time.Second

type traceOptions struct {
	query  string
	output string
}

func newTraceCommand(primary func() (client.Client, error)) *cobra.Command {
	var o traceOptions
	trace := &cobra.Command{
		Use:   "trace",
		Short: "Show where the time of an elected pod went",
	}
	pod := &cobra.Command{
		Use:     "pod NAMESPACE/NAME",
		Short:   "An elected pod's timeline: its steps, where it waits, each step's duration",
		Long:    traceLong,
		Example: traceExample,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 || strings.Count(args[0], "/") != 1 || strings.HasPrefix(args[0], "/") || strings.HasSuffix(args[0], "/") {
				return errors.New("trace pod takes one NAMESPACE/NAME, e.g. flotillactl trace pod shop/web-0")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(o.output, "json", "yaml"); err != nil {
				return err
			}
			ns, name, _ := strings.Cut(args[0], "/")
			c, err := primary()
			if err != nil {
				return err
			}
			query := cmp.Or(o.query, os.Getenv(traceQueryEnv))
			return runTracePod(cmd.Context(), c, jaegerClient{base: strings.TrimSuffix(query, "/")}, ns, name, o.output, cmd.OutOrStdout())
		},
	}
	pod.Flags().StringVar(&o.query, "tracing-query", "", "the tracing backend's query address, Jaeger's (http://HOST:16686); default $"+traceQueryEnv+"; none: the timeline from the pod's conditions and Events alone")
	pod.Flags().StringVarP(&o.output, "output", "o", "", "output format: json or yaml")
	trace.AddCommand(pod)
	return trace
}

// podTrace is what trace pod prints.
type podTrace struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Now is where the pod stands: its phase, and Flotilla's reason and message while it waits.
	Now   string `json:"now"`
	Steps []step `json:"steps"`
	// TraceID is the pod's trace (flotilla.dev/traceparent), empty without one.
	TraceID string `json:"traceID,omitempty"`
	// Spans are its trace's spans, with the linked API server spans; empty without a backend.
	Spans []spanLine `json:"spans,omitempty"`
	// TraceNote says why there are no spans (no backend, no trace on the pod, the backend's error).
	TraceNote string `json:"traceNote,omitempty"`
}

// step is one thing that happened to the pod, as the primary recorded it.
type step struct {
	At     time.Time `json:"at"`
	What   string    `json:"what"`
	Detail string    `json:"detail,omitempty"`
	// Since is the time since the step before (0 for the first).
	Since time.Duration `json:"since"`
}

func runTracePod(ctx context.Context, c client.Client, backend jaegerClient, ns, name, output string, out io.Writer) error {
	var pod corev1.Pod
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
		return fmt.Errorf("reading pod %s/%s: %w", ns, name, err)
	}
	var events corev1.EventList
	if err := c.List(ctx, &events, client.InNamespace(ns), client.MatchingFields{"involvedObject.uid": string(pod.UID)}); err != nil {
		return fmt.Errorf("reading the Events of pod %s/%s: %w", ns, name, err)
	}
	t := podTrace{Namespace: ns, Name: name, Now: podNow(&pod, time.Now()), Steps: podSteps(&pod, events.Items)}
	t.TraceID = traceIDOf(pod.Annotations[flotillav1.AnnotationTraceparent])
	switch {
	case t.TraceID == "":
		t.TraceNote = "the pod carries no trace (" + flotillav1.AnnotationTraceparent + "): the manager's tracing was off when it was admitted"
	case backend.base == "":
		t.TraceNote = "no tracing backend given (--tracing-query, $" + traceQueryEnv + ")"
	default:
		bctx, cancel := context.WithTimeout(ctx, traceBackendTimeout)
		spans, err := backend.timeline(bctx, t.TraceID)
		cancel()
		if err != nil {
			t.TraceNote = err.Error()
		}
		t.Spans = spans
	}
	if output != "" {
		return printDocument(out, output, t)
	}
	return printPodTrace(out, t)
}

// traceIDOf is the trace ID of a W3C traceparent (version-traceid-spanid-flags), empty when it is
// not one.
func traceIDOf(traceparent string) string {
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 || len(parts[1]) != 32 || strings.Trim(parts[1], "0123456789abcdef") != "" || strings.Trim(parts[1], "0") == "" {
		return ""
	}
	return parts[1]
}

// podNow says where the pod stands: its phase, and while it is Pending, why (Flotilla's reason
// and message, else the first container's waiting reason, else its unmet scheduling), for how long.
func podNow(pod *corev1.Pod, now time.Time) string {
	if !pod.DeletionTimestamp.IsZero() {
		return fmt.Sprintf("Terminating for %s", now.Sub(pod.DeletionTimestamp.Time).Round(time.Second))
	}
	phase := cmp.Or(string(pod.Status.Phase), "Pending")
	why := joinNonEmpty(": ", pod.Status.Reason, pod.Status.Message)
	if why == "" && pod.Status.Phase == corev1.PodPending {
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status != corev1.ConditionTrue {
				why = joinNonEmpty(": ", cond.Reason, cond.Message)
			}
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && why == "" {
				why = joinNonEmpty(": ", "container "+cs.Name+" "+w.Reason, w.Message)
			}
		}
	}
	line := phase
	if pod.Spec.NodeName != "" {
		line += " on " + pod.Spec.NodeName
	}
	if why != "" {
		line += ", " + why
	}
	if pod.Status.Phase == corev1.PodPending || pod.Status.Phase == "" {
		line += fmt.Sprintf(" (for %s since admission)", now.Sub(pod.CreationTimestamp.Time).Round(time.Second))
	}
	return line
}

// podSteps are the pod's admission, its conditions' transitions and its Events, in time order,
// each with the time since the step before.
func podSteps(pod *corev1.Pod, events []corev1.Event) []step {
	steps := []step{{At: pod.CreationTimestamp.Time, What: "Admitted", Detail: admittedDetail(pod)}}
	for _, cond := range pod.Status.Conditions {
		if cond.LastTransitionTime.IsZero() {
			continue
		}
		what := string(cond.Type)
		if cond.Status != corev1.ConditionTrue {
			what += "=" + string(cond.Status)
		}
		steps = append(steps, step{At: cond.LastTransitionTime.Time, What: what, Detail: joinNonEmpty(": ", cond.Reason, cond.Message)})
	}
	for _, e := range events {
		at := eventTime(&e)
		if at.IsZero() {
			continue
		}
		detail := e.Message
		if e.Count > 1 {
			detail += fmt.Sprintf(" (%d times, last %s)", e.Count, e.LastTimestamp.UTC().Format(time.TimeOnly))
		}
		what := e.Reason
		if e.Type == corev1.EventTypeWarning {
			what += " (Warning)"
		}
		steps = append(steps, step{At: at, What: what, Detail: detail})
	}
	slices.SortStableFunc(steps, func(a, b step) int { return a.At.Compare(b.At) })
	for i := 1; i < len(steps); i++ {
		steps[i].Since = steps[i].At.Sub(steps[i-1].At)
	}
	return steps
}

// admittedDetail says what the webhook decided: the virtual node it bound the pod to, or none.
func admittedDetail(pod *corev1.Pod) string {
	if pod.Labels[flotillav1.LabelProxy] != "true" {
		return "not elected: not a proxy (flotilla.dev/elect missing, or the namespace is not enabled)"
	}
	if cluster, ok := flotillav1.ClusterOfNode(pod.Spec.NodeName); ok {
		return "elected, to cluster " + cluster
	}
	return "elected, not bound yet"
}

// eventTime is when an Event first happened: its first timestamp, else its event time, else its
// creation.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	default:
		return e.CreationTimestamp.Time
	}
}

func printPodTrace(out io.Writer, t podTrace) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "Pod %s/%s: %s\n\n", t.Namespace, t.Name, t.Now)
	fmt.Fprintln(w, "TIME\t+SINCE\tSTEP\tDETAIL")
	for _, s := range t.Steps {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", s.At.UTC().Format(time.TimeOnly), shortDuration(s.Since), s.What, s.Detail)
	}
	if t.TraceID != "" || t.TraceNote != "" {
		fmt.Fprintf(w, "\nTrace %s", cmp.Or(t.TraceID, "(none)"))
		if t.TraceNote != "" {
			fmt.Fprintf(w, ": %s", t.TraceNote)
		}
		fmt.Fprintln(w)
	}
	if len(t.Spans) > 0 {
		fmt.Fprintln(w, "START\tDURATION\tSERVICE\tSPAN\tDETAIL")
		for _, s := range t.Spans {
			name := strings.Repeat("  ", s.Depth) + s.Name
			if s.Linked {
				name = strings.Repeat("  ", s.Depth) + "-> " + s.Name
			}
			fmt.Fprintf(w, "+%s\t%s\t%s\t%s\t%s\n", shortDuration(s.Start), shortDuration(s.Duration), s.Service, name, s.Detail)
		}
	}
	return w.Flush()
}

// shortDuration prints a duration to the millisecond below a minute, to the second above.
func shortDuration(d time.Duration) string {
	if d >= time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}
