package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// jaegerClient reads traces from Jaeger's query API (/api/traces), the one its UI uses.
type jaegerClient struct {
	base string
	http *http.Client
}

// jaegerTrace is a trace as Jaeger's query API returns it.
type jaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []jaegerSpan             `json:"spans"`
	Processes map[string]jaegerProcess `json:"processes"`
}

type jaegerProcess struct {
	ServiceName string `json:"serviceName"`
}

type jaegerSpan struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []jaegerRef `json:"references"`
	StartTime     int64       `json:"startTime"` // µs since the epoch
	Duration      int64       `json:"duration"`  // µs
	Tags          []jaegerTag `json:"tags"`
	ProcessID     string      `json:"processID"`
}

type jaegerRef struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

type jaegerTag struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

func (s *jaegerSpan) tag(key string) string {
	for _, t := range s.Tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

// parent is the span's parent in its own trace, empty for a root.
func (s *jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" && r.TraceID == s.TraceID {
			return r.SpanID
		}
	}
	return ""
}

// linkedTo is the span of another trace this one follows from (an OTLP link), empty when none.
func (s *jaegerSpan) linkedTo() (traceID, spanID string) {
	for _, r := range s.References {
		if r.RefType == "FOLLOWS_FROM" && r.TraceID != s.TraceID {
			return r.TraceID, r.SpanID
		}
	}
	return "", ""
}

type jaegerResponse struct {
	Data   []jaegerTrace `json:"data"`
	Errors []struct {
		Msg string `json:"msg"`
	} `json:"errors"`
}

func (j jaegerClient) get(ctx context.Context, path string, query url.Values) ([]jaegerTrace, error) {
	u := j.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("the tracing backend %s: %w", j.base, err)
	}
	hc := cmp.Or(j.http, http.DefaultClient)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the tracing backend %s: %w", j.base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading from the tracing backend %s: %w", j.base, err)
	}
	var r jaegerResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("the tracing backend %s answered %s, not Jaeger's query API: %w", j.base, resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := resp.Status
		if len(r.Errors) > 0 {
			msg = r.Errors[0].Msg
		}
		return nil, fmt.Errorf("the tracing backend %s: %s", j.base, msg)
	}
	return r.Data, nil
}

// apiServerService is the service name the Kubernetes API servers report their spans under.
const apiServerService = "apiserver"

// timeline reads trace id and the API servers' spans linked to its client spans, and lays them
// out (traceLines).
func (j jaegerClient) timeline(ctx context.Context, id string) ([]spanLine, error) {
	traces, err := j.get(ctx, "/api/traces/"+id, nil)
	if err != nil {
		return nil, err
	}
	if len(traces) == 0 {
		return nil, fmt.Errorf("the tracing backend %s has no trace %s (yet, or no longer)", j.base, id)
	}
	tr := traces[0]
	var linked []jaegerTrace
	for i := range tr.Spans {
		s := &tr.Spans[i]
		if s.tag("span.kind") != "client" || tr.Processes[s.ProcessID].ServiceName == apiServerService {
			continue
		}
		// The API server's span of this call starts and ends within it.
		found, err := j.get(ctx, "/api/traces", url.Values{
			"service": {apiServerService},
			"start":   {strconv.FormatInt(s.StartTime, 10)}, "end": {strconv.FormatInt(s.StartTime+s.Duration, 10)},
			"limit": {"200"},
		})
		if err != nil {
			return nil, err
		}
		linked = append(linked, found...)
	}
	return traceLines(tr, linked), nil
}

// spanLine is one span of a pod's timeline.
type spanLine struct {
	// Start is the time from the trace's first span.
	Start    time.Duration `json:"start"`
	Duration time.Duration `json:"duration"`
	Service  string        `json:"service"`
	Name     string        `json:"name"`
	Detail   string        `json:"detail,omitempty"`
	// Depth is how many shown spans it is below.
	Depth int `json:"depth"`
	// Linked: an API server's span in a trace of its own, linked to the call it served.
	Linked  bool   `json:"linked,omitempty"`
	SpanID  string `json:"spanID"`
	TraceID string `json:"traceID"`
}

// traceLines lays out a trace's spans, each followed by its children, in time order, with the
// spans of other traces (linked) that follow from one of its spans under that span. Of the API
// servers' spans only their requests and their calls out (to a webhook) are shown: not their
// inner steps (authentication, audit, storage).
func traceLines(tr jaegerTrace, linked []jaegerTrace) []spanLine {
	type node struct {
		span     *jaegerSpan
		service  string
		linked   bool
		children []*node
	}
	nodes := map[string]*node{}
	var order []*node
	add := func(s *jaegerSpan, service string, isLinked bool) {
		if _, dup := nodes[s.SpanID]; dup {
			return
		}
		n := &node{span: s, service: service, linked: isLinked}
		nodes[s.SpanID] = n
		order = append(order, n)
	}
	for i := range tr.Spans {
		add(&tr.Spans[i], tr.Processes[tr.Spans[i].ProcessID].ServiceName, false)
	}
	for t := range linked {
		for i := range linked[t].Spans {
			s := &linked[t].Spans[i]
			if traceID, spanID := s.linkedTo(); traceID == tr.TraceID {
				if _, ok := nodes[spanID]; ok {
					add(s, linked[t].Processes[s.ProcessID].ServiceName, true)
				}
			}
		}
	}
	// An API server's request: http.request.method from 1.35 on, http.method before.
	shown := func(n *node) bool {
		return n.service != apiServerService || n.span.tag("http.request.method") != "" || n.span.tag("http.method") != ""
	}
	// The nearest shown ancestor: hidden spans (an API server's inner steps) pass their children up.
	var parentOf func(n *node) *node
	parentOf = func(n *node) *node {
		id := n.span.parent()
		if n.linked {
			_, id = n.span.linkedTo()
		}
		p, ok := nodes[id]
		if !ok {
			return nil
		}
		if shown(p) {
			return p
		}
		return parentOf(p)
	}
	var roots []*node
	for _, n := range order {
		if !shown(n) {
			continue
		}
		if p := parentOf(n); p != nil {
			p.children = append(p.children, n)
		} else {
			roots = append(roots, n)
		}
	}
	var first int64
	for i, n := range order {
		if i == 0 || n.span.StartTime < first {
			first = n.span.StartTime
		}
	}
	byStart := func(a, b *node) int { return cmp.Compare(a.span.StartTime, b.span.StartTime) }
	var out []spanLine
	var walk func(ns []*node, depth int)
	walk = func(ns []*node, depth int) {
		slices.SortStableFunc(ns, byStart)
		for _, n := range ns {
			out = append(out, spanLine{
				Start: time.Duration(n.span.StartTime-first) * time.Microsecond, Duration: time.Duration(n.span.Duration) * time.Microsecond,
				Service: n.service, Name: n.span.OperationName, Detail: spanDetail(n.span), Depth: depth, Linked: n.linked,
				SpanID: n.span.SpanID, TraceID: n.span.TraceID,
			})
			walk(n.children, depth+1)
		}
	}
	walk(roots, 0)
	return out
}

// spanDetail is what a span says of the pod: Flotilla's attributes, or an API server's request path.
func spanDetail(s *jaegerSpan) string {
	var parts []string
	for _, k := range []string{"flotilla.cluster", "flotilla.outcome", "flotilla.waiting", "flotilla.reason", "url.path"} {
		if v := s.tag(k); v != "" {
			parts = append(parts, strings.TrimPrefix(k, "flotilla.")+"="+v)
		}
	}
	// API servers before 1.35 name the path and the status by the older HTTP conventions
	// (http.target, with the query; http.status_code): shown the same.
	if s.tag("url.path") == "" {
		if target, _, _ := strings.Cut(s.tag("http.target"), "?"); target != "" {
			parts = append(parts, "url.path="+target)
		}
	}
	code, _ := strconv.Atoi(s.tag("http.response.status_code"))
	if code == 0 {
		code, _ = strconv.Atoi(s.tag("http.status_code"))
	}
	if code >= 400 {
		parts = append(parts, "status="+strconv.Itoa(code))
	}
	return strings.Join(parts, " ")
}
