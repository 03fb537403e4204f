package proxy

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/tracing"
)

// Span names of a proxy's reconcile, each a step of the elected pod's trace.
const (
	spanReconcile    = "proxy reconcile"
	spanDependencies = "dependencies copy"
	spanCreate       = "delegate create"
	spanStatus       = "status write"
	spanDelete       = "delegate delete"
	spanRelease      = "proxy release"
)

// trace starts a span of proxy's work: the first of a reconcile continues the trace its
// admission began (the flotilla.dev/traceparent annotation), the others are its children.
func (r *Reconciler) trace(ctx context.Context, name string, proxy *corev1.Pod, cluster string) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = tracing.Extract(ctx, proxy.Annotations[flotillav1.AnnotationTraceparent])
	}
	return tracing.OrNoop(r.Tracer).Start(ctx, name, trace.WithAttributes(
		tracing.KeyNamespace.String(proxy.Namespace), tracing.KeyPod.String(proxy.Name), tracing.KeyCluster.String(cluster)))
}

// outcome tells, on the reconcile's span, where the proxy stands after the pass.
func outcome(span trace.Span, proxy *corev1.Pod) {
	phase := string(proxy.Status.Phase)
	if !proxy.DeletionTimestamp.IsZero() {
		phase = "Deleting"
	}
	span.SetAttributes(tracing.KeyOutcome.String(phase))
	if proxy.Status.Reason != "" {
		span.SetAttributes(tracing.KeyWaiting.String(proxy.Status.Reason))
	}
}
