package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// fixtureTrace is a trace Jaeger's query API returned on the test bed (tags trimmed to those
// read): an elected pod admitted, reconciled, its delegate created in secondary1, Running.
const fixtureTrace = "b527d45db2f3f84749b5dc44077eb48c"

// jaegerFixture serves the recorded trace, and for every search of the API servers' traces the
// ones recorded around the delegate's creation (the secondary's among them, linked to the call).
func jaegerFixture(t *testing.T) *httptest.Server {
	t.Helper()
	trace, err := os.ReadFile("testdata/jaeger-trace.json")
	if err != nil {
		t.Fatal(err)
	}
	linked, err := os.ReadFile("testdata/jaeger-linked.json")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/traces/"+fixtureTrace:
			_, _ = w.Write(trace)
		case r.URL.Path == "/api/traces" && r.URL.Query().Get("service") == apiServerService:
			_, _ = w.Write(linked)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"data":null,"errors":[{"code":404,"msg":"trace not found"}]}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestTimelineFollowsTheLinksToTheAPIServers(t *testing.T) {
	srv := jaegerFixture(t)
	lines, err := jaegerClient{base: srv.URL}.timeline(t.Context(), fixtureTrace)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) == 0 || lines[0].Service != apiServerService || !strings.HasPrefix(lines[0].Name, "POST /api/v1/namespaces") || lines[0].Depth != 0 {
		t.Fatalf("the trace should open with the primary's API server creating the pod; got %+v", lines[:min(1, len(lines))])
	}
	seen := map[string]int{}
	var admission, create, linkedCreate *spanLine
	for i := range lines {
		l := &lines[i]
		seen[l.SpanID]++
		switch {
		case l.Name == "admission pods":
			admission = l
		case l.Name == "delegate create":
			create = l
		case l.Linked && l.Detail == "url.path=/api/v1/namespaces/tr1/pods":
			linkedCreate = l
		}
		for _, inner := range []string{"authentication", "authorization", "audit", "etcd"} {
			if strings.Contains(l.Name, inner) {
				t.Errorf("an API server's inner step is shown: %q", l.Name)
			}
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("span %s shown %d times", id, n)
		}
	}
	if admission == nil || admission.Service != "flotilla-manager" || !strings.Contains(admission.Detail, "outcome=elected") || admission.Depth != 2 {
		t.Errorf("want the webhook's admission under the API server's call to it; got %+v", admission)
	}
	if create == nil || !strings.Contains(create.Detail, "cluster=secondary1") {
		t.Fatalf("want the delegate's creation in secondary1; got %+v", create)
	}
	if linkedCreate == nil || linkedCreate.TraceID == fixtureTrace || linkedCreate.Depth != create.Depth+2 {
		t.Errorf("want the secondary's API server creating the delegate, from its own trace, under the manager's POST; got %+v", linkedCreate)
	}
	var last spanLine
	for _, l := range lines {
		if l.Name == "proxy reconcile" {
			last = l
		}
	}
	if !strings.Contains(last.Detail, "outcome=Running") {
		t.Errorf("the last reconcile should say Running; got %+v", last)
	}
}

func TestTimelineWithoutTheTrace(t *testing.T) {
	srv := jaegerFixture(t)
	_, err := jaegerClient{base: srv.URL}.timeline(t.Context(), "0123456789abcdef0123456789abcdef")
	if err == nil || !strings.Contains(err.Error(), "trace not found") {
		t.Fatalf("want the backend's own error, got %v", err)
	}
}

func TestTraceIDOf(t *testing.T) {
	for in, want := range map[string]string{
		"00-b527d45db2f3f84749b5dc44077eb48c-984399f25992fd14-01": "b527d45db2f3f84749b5dc44077eb48c",
		"00-00000000000000000000000000000000-984399f25992fd14-01": "",
		"00-B527D45DB2F3F84749B5DC44077EB48C-984399f25992fd14-01": "",
		"b527d45db2f3f84749b5dc44077eb48c":                        "",
		"":                                                        "",
	} {
		if got := traceIDOf(in); got != want {
			t.Errorf("traceIDOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// A proxy waiting for a missing Secret says so, and since when; its steps come in time order
// with the time between them.
func TestPodTimelineOfAWaitingPod(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", CreationTimestamp: metav1.NewTime(t0),
			Labels: map[string]string{flotillav1.LabelProxy: "true"}},
		Spec: corev1.PodSpec{NodeName: flotillav1.VirtualNodeName("eu")},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Reason: flotillav1.ReasonWaitingForDependencies,
			Message: "Waiting for Secret shop/db-password in the primary",
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(100 * time.Millisecond))},
			}},
	}
	events := []corev1.Event{
		{Reason: flotillav1.ReasonWaitingForDependencies, Type: corev1.EventTypeWarning, Message: "Waiting for Secret shop/db-password in the primary",
			FirstTimestamp: metav1.NewTime(t0.Add(2 * time.Second)), LastTimestamp: metav1.NewTime(t0.Add(40 * time.Second)), Count: 3},
	}
	now := podNow(pod, t0.Add(90*time.Second))
	for _, want := range []string{"Pending on " + flotillav1.VirtualNodeName("eu"), flotillav1.ReasonWaitingForDependencies, "Secret shop/db-password", "for 1m30s"} {
		if !strings.Contains(now, want) {
			t.Errorf("now = %q, want it to say %q", now, want)
		}
	}
	steps := podSteps(pod, events)
	if len(steps) != 3 || steps[0].What != "Admitted" || steps[0].Detail != "elected, to cluster eu" ||
		steps[1].What != "PodScheduled" || steps[1].Since != 100*time.Millisecond ||
		steps[2].What != flotillav1.ReasonWaitingForDependencies+" (Warning)" || steps[2].Since != 1900*time.Millisecond ||
		!strings.Contains(steps[2].Detail, "3 times") {
		t.Errorf("steps = %+v", steps)
	}
	var b strings.Builder
	if err := printPodTrace(&b, podTrace{Namespace: "shop", Name: "web", Now: now, Steps: steps, TraceNote: "no tracing backend given"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Pod shop/web: Pending", "+SINCE", "1.9s", "no tracing backend given"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("printed:\n%s\nwant it to hold %q", b.String(), want)
		}
	}
}

// An API server's span shows its request path and a failed status by either HTTP convention: 1.35's
// (url.path, http.response.status_code) or the older one (http.target with its query,
// http.status_code).
func TestSpanDetailReadsBothHTTPConventions(t *testing.T) {
	span := func(tags map[string]any) *jaegerSpan {
		s := &jaegerSpan{}
		for k, v := range tags {
			s.Tags = append(s.Tags, jaegerTag{Key: k, Value: v})
		}
		return s
	}
	for name, tc := range map[string]struct {
		tags map[string]any
		want string
	}{
		"1.35 and later":  {map[string]any{"url.path": "/api/v1/namespaces/a/pods", "http.response.status_code": 409}, "url.path=/api/v1/namespaces/a/pods status=409"},
		"before 1.35":     {map[string]any{"http.target": "/api/v1/namespaces/a/pods?timeout=15s", "http.status_code": "404"}, "url.path=/api/v1/namespaces/a/pods status=404"},
		"a success":       {map[string]any{"http.target": "/api/v1/namespaces/a/pods", "http.status_code": 201}, "url.path=/api/v1/namespaces/a/pods"},
		"both: the newer": {map[string]any{"url.path": "/new", "http.target": "/old"}, "url.path=/new"},
	} {
		if got := spanDetail(span(tc.tags)); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}

// A secondary's API server before 1.35 names its request spans' attributes by the older HTTP
// conventions (http.method, http.target): its span of the delegate's creation is still shown,
// linked under the manager's call, with its path.
func TestAnOlderAPIServersRequestIsShownUnderTheCall(t *testing.T) {
	tags := func(kv ...string) []jaegerTag {
		var out []jaegerTag
		for i := 0; i < len(kv); i += 2 {
			out = append(out, jaegerTag{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	manager := jaegerTrace{TraceID: "t1", Processes: map[string]jaegerProcess{"p1": {ServiceName: "flotilla-manager"}},
		Spans: []jaegerSpan{
			{TraceID: "t1", SpanID: "create", OperationName: "delegate create", ProcessID: "p1", StartTime: 10, Duration: 10},
			{TraceID: "t1", SpanID: "post", OperationName: "POST pods", ProcessID: "p1", StartTime: 11, Duration: 8,
				References: []jaegerRef{{RefType: "CHILD_OF", TraceID: "t1", SpanID: "create"}}, Tags: tags("span.kind", "client")},
		}}
	secondary := jaegerTrace{TraceID: "t2", Processes: map[string]jaegerProcess{"p2": {ServiceName: apiServerService}},
		Spans: []jaegerSpan{{TraceID: "t2", SpanID: "served", OperationName: "HTTP POST", ProcessID: "p2", StartTime: 12, Duration: 5,
			References: []jaegerRef{{RefType: "FOLLOWS_FROM", TraceID: "t1", SpanID: "post"}},
			Tags:       tags("http.method", "POST", "http.target", "/api/v1/namespaces/a/pods?timeout=15s")}}}
	lines := traceLines(manager, []jaegerTrace{secondary})
	if len(lines) != 3 || !lines[2].Linked || lines[2].Depth != 2 || lines[2].Detail != "url.path=/api/v1/namespaces/a/pods" {
		t.Fatalf("want the older API server's span linked under POST pods, with its path; got %+v", lines)
	}
}

// trace pod -o yaml prints the same document as -o json: same fields, same values.
func TestTracePodPrintsJSONAndYAMLAlike(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "web-uid", CreationTimestamp: metav1.NewTime(t0),
		Labels: map[string]string{flotillav1.LabelProxy: "true"}},
		Spec: corev1.PodSpec{NodeName: flotillav1.VirtualNodeName("eu")},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(3 * time.Second))}}}}
	event := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web.1"}, Reason: "Delegated", Message: "delegate created in eu",
		InvolvedObject: corev1.ObjectReference{UID: "web-uid"}, FirstTimestamp: metav1.NewTime(t0.Add(time.Second))}
	primary := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(pod, event).
		WithIndex(&corev1.Event{}, "involvedObject.uid", func(o client.Object) []string { return []string{string(o.(*corev1.Event).InvolvedObject.UID)} }).
		Build()
	traced := func(output string) []byte {
		t.Helper()
		var out bytes.Buffer
		if err := runTracePod(t.Context(), primary, jaegerClient{}, "shop", "web", output, &out); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	raw := traced("json")
	exactKeys(t, "the trace", raw, "namespace", "name", "now", "steps", "traceNote")
	var fromJSON, fromYAML podTrace
	if err := json.Unmarshal(raw, &fromJSON); err != nil {
		t.Fatal(err)
	}
	if len(fromJSON.Steps) != 3 || fromJSON.Steps[1].What != "Delegated" || fromJSON.Steps[2].Since != 2*time.Second {
		t.Errorf("steps = %+v", fromJSON.Steps)
	}
	rawYAML := traced("yaml")
	if err := yaml.Unmarshal(rawYAML, &fromYAML); err != nil || !reflect.DeepEqual(fromYAML, fromJSON) {
		t.Errorf("-o yaml says %+v (%v), -o json %+v\n%s", fromYAML, err, fromJSON, rawYAML)
	}
	if !strings.Contains(string(rawYAML), "namespace: shop") {
		t.Errorf("-o yaml is not YAML:\n%s", rawYAML)
	}
	if _, err := run(t, "trace", "pod", "shop/web", "-o", "table"); err == nil || !strings.Contains(err.Error(), "want one of json, yaml") {
		t.Errorf("-o table: %v, want the formats named", err)
	}
}
