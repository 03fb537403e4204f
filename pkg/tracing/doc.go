// Package tracing owns the manager's OpenTelemetry tracing: the tracer provider that exports spans
// over OTLP (off unless an endpoint is given), the client transport that passes a span's context
// on to the API servers so their own spans join the trace, the admission handler's server span,
// and the elected pod's trace context kept on its proxy (flotilla.dev/traceparent), from which
// every later span of that pod continues the same trace.
//
// A span carries names (pod, namespace, cluster), outcomes and reasons, never an object's content:
// an error is recorded by its API status reason, not its message, since the API server's
// validation messages quote the values they refuse (an environment value, a Secret's data).
package tracing
