package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// jaegerTrace is a trace as the bed's Jaeger query API returns it.
type jaegerTrace struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		TraceID       string `json:"traceID"`
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		References    []struct {
			RefType string `json:"refType"`
			TraceID string `json:"traceID"`
			SpanID  string `json:"spanID"`
		} `json:"references"`
		StartTime int64 `json:"startTime"`
		Duration  int64 `json:"duration"`
		Tags      []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"tags"`
		ProcessID string `json:"processID"`
	} `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

// jaegerSpan is one span with its service and tags, flattened for matching.
type jaegerSpan struct {
	TraceID, SpanID, Name, Service string
	Start, Duration                int64
	Tags                           map[string]string
	// Parent is the span it is a child of in its own trace; LinkTrace/LinkSpan the span of another
	// trace it follows from.
	Parent, LinkTrace, LinkSpan string
}

func (t jaegerTrace) flat() []jaegerSpan {
	out := make([]jaegerSpan, 0, len(t.Spans))
	for _, s := range t.Spans {
		f := jaegerSpan{TraceID: s.TraceID, SpanID: s.SpanID, Name: s.OperationName, Service: t.Processes[s.ProcessID].ServiceName,
			Start: s.StartTime, Duration: s.Duration, Tags: map[string]string{}}
		for _, tag := range s.Tags {
			f.Tags[tag.Key] = fmt.Sprint(tag.Value)
		}
		for _, r := range s.References {
			switch {
			case r.RefType == "CHILD_OF" && r.TraceID == s.TraceID:
				f.Parent = r.SpanID
			case r.RefType == "FOLLOWS_FROM":
				f.LinkTrace, f.LinkSpan = r.TraceID, r.SpanID
			}
		}
		out = append(out, f)
	}
	return out
}

// jaegerGet reads traces from the bed's Jaeger query API.
func jaegerGet(ctx context.Context, path string, query url.Values) ([]jaegerTrace, error) {
	u := bed.Jaeger.QueryURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	var body struct {
		Data []jaegerTrace `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	return body.Data, nil
}

// portOf is the port of a cluster's API server, which its spans name (server.port).
func portOf(host string) string {
	u, err := url.Parse(host)
	Expect(err).NotTo(HaveOccurred())
	return u.Port()
}

// findSpan is the first span named name (and, when given, with the tag key=value).
func findSpan(spans []jaegerSpan, service, name string, tags ...string) (jaegerSpan, bool) {
	for _, s := range spans {
		if s.Service != service || s.Name != name {
			continue
		}
		ok := true
		for i := 0; i+1 < len(tags); i += 2 {
			if s.Tags[tags[i]] != tags[i+1] {
				ok = false
			}
		}
		if ok {
			return s, true
		}
	}
	return jaegerSpan{}, false
}

var _ = Describe("Tracing", Ordered, Label("tracing"), func() {
	BeforeAll(func(ctx SpecContext) {
		if bed.Jaeger == nil {
			Skip("the bed runs without Jaeger (make tools builds it; see the suite's output)")
		}
		joinBothSecondaries(ctx)
	}, NodeTimeout(2*time.Minute))

	It("gives an elected pod one trace: the primary's API server, the webhook, each reconcile, the delegate's creation and the status write, with the secondary's API server linked; no value of the pod in any span", func(ctx SpecContext) {
		ns := fmt.Sprintf("traced-%d", time.Now().UnixNano())
		_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{flotillav1.LabelEnabled: "true"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = bed.Primary.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		})
		secretValue, envValue := fmt.Sprintf("s3cr3t-%d", time.Now().UnixNano()), fmt.Sprintf("env-%d", time.Now().UnixNano())
		_, err = bed.Primary.Clientset.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"},
			StringData: map[string]string{"password": secretValue}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox", Env: []corev1.EnvVar{
				{Name: "PLAIN", Value: envValue},
				{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}},
			}}}}}
		Expect(clientOf(bed.Primary).Create(ctx, pod)).To(Succeed())
		traceparent := pod.Annotations[flotillav1.AnnotationTraceparent]
		Expect(traceparent).To(MatchRegexp(`^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`), "the webhook keeps the admission's trace context on the proxy")
		traceID := strings.Split(traceparent, "-")[1]
		cluster, ok := flotillav1.ClusterOfNode(pod.Spec.NodeName)
		Expect(ok).To(BeTrue(), "the webhook binds the proxy: %s", pod.Spec.NodeName)
		var sec = bed.Secondaries[0]
		if cluster == bed.Secondaries[1].Name {
			sec = bed.Secondaries[1]
		}
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

		primaryPort, secondaryPort := portOf(bed.Primary.RESTConfig.Host), portOf(sec.RESTConfig.Host)
		var spans []jaegerSpan
		var create, admission, reconcile, delegate, status jaegerSpan
		// The manager and each API server export in their own batches: the trace fills within
		// seconds, its spans arriving in no fixed order, so every span it must hold is awaited.
		Eventually(func(g Gomega) {
			traces, err := jaegerGet(ctx, "/api/traces/"+traceID, nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(traces).To(HaveLen(1))
			spans = traces[0].flat()
			var ok bool
			create, ok = findSpan(spans, "apiserver", "POST /api/v1/namespaces/{:namespace}/pods", "server.port", primaryPort, "url.path", "/api/v1/namespaces/"+ns+"/pods")
			g.Expect(ok).To(BeTrue(), "the primary's API server admitting the pod")
			admission, ok = findSpan(spans, "flotilla-manager", "admission pods", "k8s.pod.name", "web", "flotilla.outcome", "elected", "flotilla.cluster", cluster)
			g.Expect(ok).To(BeTrue(), "the webhook's admission")
			reconcile, ok = findSpan(spans, "flotilla-manager", "proxy reconcile", "k8s.pod.name", "web", "k8s.namespace.name", ns, "flotilla.cluster", cluster)
			g.Expect(ok).To(BeTrue(), "a proxy reconcile")
			delegate, ok = findSpan(spans, "flotilla-manager", "delegate create", "flotilla.cluster", cluster)
			g.Expect(ok).To(BeTrue(), "the delegate's creation")
			_, ok = findSpan(spans, "flotilla-manager", "dependencies copy", "flotilla.cluster", cluster)
			g.Expect(ok).To(BeTrue(), "the copy of the Secret")
			status, ok = findSpan(spans, "flotilla-manager", "status write", "flotilla.outcome", "Running")
			g.Expect(ok).To(BeTrue(), "the status write that says Running")
		}).WithContext(ctx).WithTimeout(45 * time.Second).WithPolling(time.Second).Should(Succeed())

		for _, s := range spans {
			Expect(s.TraceID).To(Equal(traceID))
		}
		// In order: the pod's creation, its admission inside it, then the reconciles, the
		// delegate's creation and the status write after it.
		Expect(admission.Start).To(BeNumerically(">=", create.Start))
		Expect(admission.Start + admission.Duration).To(BeNumerically("<=", create.Start+create.Duration))
		Expect(reconcile.Start).To(BeNumerically(">", admission.Start))
		Expect(reconcile.Parent).To(Equal(admission.SpanID), "each reconcile continues from the admission")
		Expect(delegate.Start).To(BeNumerically(">", admission.Start))
		Expect(status.Start).To(BeNumerically(">", delegate.Start))

		// The manager's call creating the delegate, and the secondary's API server serving it: the
		// API server makes its own trace for a caller outside system:masters and system:monitoring
		// (the manager's ServiceAccount), linked to the call.
		var post jaegerSpan
		for _, s := range spans {
			if s.Parent == delegate.SpanID && s.Name == "POST pods" {
				post = s
			}
		}
		Expect(post.SpanID).NotTo(BeEmpty(), "the manager's POST of the delegate")
		var served jaegerSpan
		Eventually(func(g Gomega) {
			traces, err := jaegerGet(ctx, "/api/traces", url.Values{"service": {"apiserver"},
				"start": {strconv.FormatInt(post.Start, 10)}, "end": {strconv.FormatInt(post.Start+post.Duration, 10)}, "limit": {"500"}})
			g.Expect(err).NotTo(HaveOccurred())
			for _, t := range traces {
				for _, s := range t.flat() {
					if s.LinkTrace == traceID && s.LinkSpan == post.SpanID {
						served = s
					}
				}
			}
			g.Expect(served.SpanID).NotTo(BeEmpty(), "the secondary's API server span linked to the manager's POST")
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(served.Service).To(Equal("apiserver"))
		// The HTTP attributes of the secondary's version: server.port and url.path from 1.35's
		// OpenTelemetry instrumentation on, net.host.port and http.target (with the query) before.
		if _, older := served.Tags["net.host.port"]; older {
			Expect(served.Tags).To(HaveKeyWithValue("net.host.port", secondaryPort))
			Expect(served.Tags).To(HaveKeyWithValue("http.target", HavePrefix("/api/v1/namespaces/"+ns+"/pods")))
		} else {
			Expect(served.Tags).To(HaveKeyWithValue("server.port", secondaryPort))
			Expect(served.Tags).To(HaveKeyWithValue("url.path", "/api/v1/namespaces/"+ns+"/pods"))
		}

		// Names, outcomes and reasons only: neither the Secret's value nor the environment's.
		raw, err := json.Marshal(spans)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(raw)).NotTo(ContainSubstring(secretValue))
		Expect(string(raw)).NotTo(ContainSubstring(envValue))
		Expect(fmt.Sprint(served.Tags)).NotTo(Or(ContainSubstring(secretValue), ContainSubstring(envValue)))

		// flotillactl lays it out, the linked span under the manager's call.
		out, err := flotillactl(ctx, "trace", "pod", ns+"/web", "--tracing-query", bed.Jaeger.QueryURL)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("Trace " + traceID))
		Expect(out).To(MatchRegexp(`delegate create\s+cluster=` + cluster))
		// The span's name is the API server's: "POST /api/v1/namespaces/{:namespace}/pods" from
		// 1.35 on, "HTTP POST" before.
		Expect(out).To(MatchRegexp(`-> (POST /api/v1/namespaces/\{:namespace\}/pods|HTTP POST)\s+url.path=/api/v1/namespaces/` + ns + `/pods(\s|$)`))
		Expect(out).NotTo(ContainSubstring(secretValue))
	}, SpecTimeout(3*time.Minute))

	It("shows a pod waiting for a missing Secret in flotillactl trace pod, with and without the backend", func(ctx SpecContext) {
		ns := fmt.Sprintf("traced-wait-%d", time.Now().UnixNano())
		_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{flotillav1.LabelEnabled: "true"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = bed.Primary.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		})
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "waits", Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox", EnvFrom: []corev1.EnvFromSource{
				{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "not-yet"}}}}}}}}
		Expect(clientOf(bed.Primary).Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			out, err := flotillactl(ctx, "trace", "pod", ns+"/waits")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(MatchRegexp(`Pod ` + ns + `/waits: Pending on flotilla-\S+, WaitingForDependencies: .*not-yet`))
			g.Expect(out).To(ContainSubstring("no tracing backend given"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			out, err := flotillactl(ctx, "trace", "pod", ns+"/waits", "--tracing-query", bed.Jaeger.QueryURL)
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(MatchRegexp(`proxy reconcile\s+cluster=\S+ outcome=Pending waiting=WaitingForDependencies`))
		}).WithContext(ctx).WithTimeout(45 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("traces a Replicator's pass with one apply span per cluster it writes to", func(ctx SpecContext) {
		name := fmt.Sprintf("traced-%d", time.Now().UnixNano())
		targets := []string{bed.Secondaries[0].Name, bed.Secondaries[1].Name}
		rep := &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: flotillav1.ReplicatorSpec{
			TargetCluster: targets, ReplicationNamespace: name, ConfigMapName: "settings", ConfigMapData: map[string]string{"mode": "traced"}}}
		Expect(clientOf(bed.Primary).Create(ctx, rep)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = clientOf(bed.Primary).Delete(ctx, rep) })
		start := time.Now().Add(-time.Second)
		Eventually(func(g Gomega) {
			traces, err := jaegerGet(ctx, "/api/traces", url.Values{"service": {"flotilla-manager"}, "operation": {"replicator reconcile"},
				"tags": {fmt.Sprintf(`{"flotilla.name":%q}`, name)}, "start": {strconv.FormatInt(start.UnixMicro(), 10)}, "limit": {"20"}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(traces).NotTo(BeEmpty())
			var synced bool
			for _, t := range traces {
				var clusters []string
				for _, s := range t.flat() {
					if s.Name == "replicator apply" && s.Tags["flotilla.outcome"] == "Synced" {
						clusters = append(clusters, s.Tags["flotilla.cluster"])
					}
				}
				slices.Sort(clusters)
				synced = synced || slices.Equal(clusters, []string{"primary", targets[0], targets[1]})
			}
			g.Expect(synced).To(BeTrue(), "a pass applied to the primary and both secondaries, each span naming its cluster")
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
	}, SpecTimeout(2*time.Minute))
})
