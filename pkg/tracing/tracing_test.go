package tracing

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// recorded is a provider whose spans are kept in memory, as the OTLP exporter would send them.
func recorded(t *testing.T) (*Provider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.WithoutCancel(t.Context())) })
	return &Provider{tp: tp}, rec
}

func TestRequestName(t *testing.T) {
	for _, c := range []struct{ method, path, want string }{
		{"POST", "/api/v1/namespaces/team-a/pods", "POST pods"},
		{"PATCH", "/api/v1/namespaces/team-a/pods/web-0/status", "PATCH pods/status"},
		{"GET", "/api/v1/namespaces/team-a", "GET namespaces"},
		{"DELETE", "/api/v1/namespaces/team-a/pods/web-0", "DELETE pods"},
		{"PATCH", "/apis/apps/v1/namespaces/team-a/deployments/web", "PATCH deployments"},
		{"GET", "/api/v1/nodes/vn-1", "GET nodes"},
		{"POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests", "POST certificatesigningrequests"},
		{"GET", "/healthz", "GET /healthz"},
	} {
		if got := RequestName(c.method, c.path); got != c.want {
			t.Errorf("RequestName(%s %s) = %q, want %q", c.method, c.path, got, c.want)
		}
	}
}

// A request made inside a span carries its trace context to the API server in a client span of
// its own; one made outside any span (an informer's watch) is sent as it is, untraced.
func TestWrapTransportPassesTheSpanOn(t *testing.T) {
	got := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("traceparent")
	}))
	defer srv.Close()
	p, rec := recorded(t)
	client := &http.Client{Transport: p.WrapTransport(http.DefaultTransport)}

	ctx, parent := p.Tracer().Start(t.Context(), "proxy reconcile")
	get := func(ctx context.Context) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPatch, srv.URL+"/api/v1/namespaces/a/pods/b/status", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	get(ctx)
	parent.End()
	get(t.Context())

	traced, untraced := <-got, <-got
	if untraced != "" {
		t.Errorf("a request outside any span was sent with traceparent %q", untraced)
	}
	tid := parent.SpanContext().TraceID().String()
	if !strings.Contains(traced, tid) {
		t.Fatalf("traceparent %q does not carry the reconcile's trace %s", traced, tid)
	}
	var client1 sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindClient {
			client1 = s
		}
	}
	if client1 == nil || client1.Name() != "PATCH pods/status" || client1.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("want one client span PATCH pods/status, child of the reconcile; got %v", rec.Ended())
	}
	if !strings.Contains(traced, client1.SpanContext().SpanID().String()) {
		t.Errorf("the API server's parent should be the client span %s, got %q", client1.SpanContext().SpanID(), traced)
	}
}

// The admission's server span is the child of the API server's span that called the webhook.
func TestHandlerContinuesTheCallersTrace(t *testing.T) {
	p, rec := recorded(t)
	var inside trace.SpanContext
	h := p.Handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		inside = trace.SpanContextFromContext(r.Context())
	}), "admission pods")
	caller := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/mutate-v1-pod", nil)
	req.Header.Set("traceparent", caller)
	h.ServeHTTP(httptest.NewRecorder(), req)
	if inside.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
		t.Fatalf("the handler's span is in trace %s, want the caller's", inside.TraceID())
	}
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Parent().SpanID().String() != "b7ad6b7169203331" {
		t.Fatalf("want the server span, child of the caller's span; got %v", spans)
	}
}

// The traceparent the webhook writes on a proxy brings its reconciles back into the same trace.
func TestInjectExtract(t *testing.T) {
	p, _ := recorded(t)
	if got := Inject(t.Context()); got != "" {
		t.Errorf("Inject without a span = %q, want empty", got)
	}
	ctx, span := p.Tracer().Start(t.Context(), "admission")
	tp := Inject(ctx)
	span.End()
	later, child := p.Tracer().Start(Extract(t.Context(), tp), "proxy reconcile")
	defer child.End()
	if got := trace.SpanContextFromContext(later); got.TraceID() != span.SpanContext().TraceID() {
		t.Errorf("the later span is in trace %s, want %s", got.TraceID(), span.SpanContext().TraceID())
	}
	for _, bad := range []string{"", "garbage", "00-zz-yy-01"} {
		if sc := trace.SpanContextFromContext(Extract(t.Context(), bad)); sc.IsValid() {
			t.Errorf("Extract(%q) made a valid span context %v", bad, sc)
		}
	}
}

// An error is recorded by its API reason: the API server's messages quote the values they
// refuse, and no value of a request goes into a span.
func TestEndRecordsTheReasonNotTheMessage(t *testing.T) {
	p, rec := recorded(t)
	secret := "s3cr3t-value-from-a-secret"
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "web-0", field.ErrorList{
		field.Invalid(field.NewPath("spec", "containers").Index(0).Child("env").Index(0).Child("value"), secret, "too long")})
	for _, err := range []error{invalid, errors.New("dial tcp: " + secret), nil} {
		_, span := p.Tracer().Start(t.Context(), "delegate create")
		End(span, err)
	}
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	for i, want := range []string{"Invalid", "Error", ""} {
		s := spans[i]
		if s.Status().Description != want {
			t.Errorf("span %d: status %q, want %q", i, s.Status().Description, want)
		}
		for _, a := range s.Attributes() {
			if strings.Contains(a.Value.Emit(), secret) {
				t.Errorf("span %d: attribute %s holds the refused value", i, a.Key)
			}
		}
		for _, e := range s.Events() {
			for _, a := range e.Attributes {
				if strings.Contains(a.Value.Emit(), secret) {
					t.Errorf("span %d: event %s holds the refused value", i, e.Name)
				}
			}
		}
	}
}

func TestOffIsNil(t *testing.T) {
	p, err := Start(t.Context(), Options{SamplingRate: 1}, testr.New(t))
	if err != nil || p != nil {
		t.Fatalf("Start without an endpoint = %v, %v; want nil, nil", p, err)
	}
	rt := http.DefaultTransport
	if p.WrapTransport(rt) != rt {
		t.Error("a nil provider wrapped the transport")
	}
	if p.Shutdown(t.Context()) != nil {
		t.Error("a nil provider's Shutdown failed")
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Endpoint: "collector:4317", SamplingRate: 1}, ""},
		{Options{Endpoint: "https://collector:4317", SamplingRate: 0.1}, ""},
		{Options{SamplingRate: 1.5}, "--tracing-sampling-rate"},
		{Options{Endpoint: "grpc://collector:4317"}, "--tracing-endpoint"},
	} {
		err := c.o.Validate()
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("Validate(%+v) = %v, want an error naming %q", c.o, err, c.want)
		}
	}
}
