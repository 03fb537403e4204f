package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"github.com/flotilla-dev/flotilla/internal/apicalls"
)

// ServiceName is the service the manager's spans are reported under.
const ServiceName = "flotilla-manager"

// instrumentation names the tracer: the spans' scope.
const instrumentation = "github.com/flotilla-dev/flotilla"

// Options configure tracing.
type Options struct {
	// Endpoint is the OTLP gRPC collector: host:port (plain text, as Kubernetes' own tracing
	// configuration), or an http:// or https:// URL; empty turns tracing off (--tracing-endpoint).
	Endpoint string
	// SamplingRate is the fraction of new traces kept, 0 to 1; a span whose parent was sampled
	// (an API server's, an elected pod's) is kept whatever the rate (--tracing-sampling-rate).
	SamplingRate float64
	// Version and Instance name this manager in the spans' resource.
	Version, Instance string
}

// Validate refuses a rate outside 0..1 and an endpoint URL of another scheme, naming the flags.
func (o Options) Validate() error {
	var errs []error
	if o.SamplingRate < 0 || o.SamplingRate > 1 {
		errs = append(errs, fmt.Errorf("--tracing-sampling-rate %v: want 0 to 1", o.SamplingRate))
	}
	if scheme, _, ok := strings.Cut(o.Endpoint, "://"); ok && scheme != "http" && scheme != "https" {
		errs = append(errs, fmt.Errorf("--tracing-endpoint %q: want host:port, or an http:// or https:// URL", o.Endpoint))
	}
	return errors.Join(errs...)
}

// Provider is the manager's tracing: nil when it is off, and every method of a nil Provider
// does nothing.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// Start builds the exporter and the tracer provider and makes them, with the W3C trace context
// propagator, the process' global ones (virtual-kubelet's spans use them too). Nil when opts has
// no endpoint. The exporter connects lazily: a collector that does not answer costs dropped
// spans, never a stalled manager.
func Start(ctx context.Context, opts Options, log logr.Logger) (*Provider, error) {
	if opts.Endpoint == "" {
		return nil, nil
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	var endpoint otlptracegrpc.Option
	if strings.Contains(opts.Endpoint, "://") {
		endpoint = otlptracegrpc.WithEndpointURL(opts.Endpoint)
	} else {
		endpoint = otlptracegrpc.WithEndpoint(opts.Endpoint)
	}
	opt := []otlptracegrpc.Option{endpoint}
	if !strings.HasPrefix(opts.Endpoint, "https://") {
		opt = append(opt, otlptracegrpc.WithInsecure())
	}
	exp, err := otlptracegrpc.New(ctx, opt...)
	if err != nil {
		return nil, fmt.Errorf("creating the OTLP exporter for %s: %w", opts.Endpoint, err)
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", ServiceName),
		attribute.String("service.version", opts.Version),
		attribute.String("service.instance.id", opts.Instance),
	)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(opts.SamplingRate))),
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
	)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagator)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.V(1).Info("Tracing: spans not exported", "error", err.Error())
	}))
	log.Info("Tracing on", "endpoint", opts.Endpoint, "samplingRate", opts.SamplingRate)
	return &Provider{tp: tp}, nil
}

// propagator is the W3C trace context, as the API servers read and write it.
var propagator = propagation.TraceContext{}

// Shutdown exports the spans still batched and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	if err := p.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("stopping tracing: %w", err)
	}
	return nil
}

// tracerProvider is the provider spans start from: a no-op one when tracing is off.
func (p *Provider) tracerProvider() trace.TracerProvider {
	if p == nil {
		return noop.NewTracerProvider()
	}
	return p.tp
}

// Tracer is the tracer of Flotilla's own spans.
func (p *Provider) Tracer() trace.Tracer {
	return p.tracerProvider().Tracer(instrumentation)
}

// OrNoop is t, or a tracer whose spans do nothing when t is nil (a reconciler built without one).
func OrNoop(t trace.Tracer) trace.Tracer {
	if t == nil {
		return noop.NewTracerProvider().Tracer(instrumentation)
	}
	return t
}

// WrapConfig makes cfg's clients pass a span's context on to the API server (a traceparent
// header) inside a client span of their own. Only a request whose context carries a span is
// traced: informers' lists and watches, which run for the process' life, are not.
func (p *Provider) WrapConfig(cfg *rest.Config) {
	if p == nil {
		return
	}
	cfg.Wrap(p.WrapTransport)
}

var _ transport.WrapperFunc = (*Provider)(nil).WrapTransport

// WrapTransport is WrapConfig's round tripper.
func (p *Provider) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	if p == nil {
		return rt
	}
	return otelhttp.NewTransport(rt,
		otelhttp.WithTracerProvider(p.tp),
		otelhttp.WithPropagators(propagator),
		otelhttp.WithFilter(func(r *http.Request) bool { return trace.SpanContextFromContext(r.Context()).IsValid() }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return RequestName(r.Method, r.URL.Path) }),
	)
}

// Handler serves h inside a server span named name, the child of the caller's span when the
// request carries one (the API server calling the webhook passes its own).
func (p *Provider) Handler(h http.Handler, name string) http.Handler {
	if p == nil {
		return h
	}
	return otelhttp.NewHandler(h, name, otelhttp.WithTracerProvider(p.tp), otelhttp.WithPropagators(propagator))
}

// RequestName names a Kubernetes API request by its verb and resource, not its object
// ("PATCH pods/status", "POST pods", "GET namespaces"), so a span's name does not grow with
// the objects a cluster holds.
func RequestName(method, path string) string {
	if resource, _, ok := apicalls.Resource(path); ok {
		return method + " " + resource
	}
	return method + " " + path
}

// Inject is the traceparent of the span in ctx; empty when ctx carries none.
func Inject(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	propagator.Inject(ctx, carrier)
	return carrier.Get("traceparent")
}

// Extract is ctx continuing the trace of traceparent; ctx unchanged when it is empty or not a
// valid trace context.
func Extract(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// Attribute keys of Flotilla's spans.
const (
	KeyNamespace = attribute.Key("k8s.namespace.name")
	KeyPod       = attribute.Key("k8s.pod.name")
	KeyCluster   = attribute.Key("flotilla.cluster")
	KeyOutcome   = attribute.Key("flotilla.outcome")
	KeyReason    = attribute.Key("flotilla.reason")
	KeyWaiting   = attribute.Key("flotilla.waiting")
	KeyName      = attribute.Key("flotilla.name")
)

// End ends span, with err's API status reason (and code) as its error: never err's message,
// which may quote what a request carried.
func End(span trace.Span, err error) {
	if err != nil {
		reason := string(apierrors.ReasonForError(err))
		if reason == "" {
			reason = "Error"
		}
		span.SetAttributes(KeyReason.String(reason))
		span.SetStatus(codes.Error, reason)
	}
	span.End()
}
