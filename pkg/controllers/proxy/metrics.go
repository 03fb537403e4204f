package proxy

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/flotilla-dev/flotilla/internal/leadermetrics"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// The legs of an elected pod's start (label leg of flotilla_elected_pod_start_leg_seconds).
const (
	// LegAdmissionToDelegateCreated is from the proxy's creation (its admission) to its delegate
	// created in the secondary.
	LegAdmissionToDelegateCreated = "admission_to_delegate_created"
	// LegDelegateCreatedToRunning is from the delegate's creation to the reconciler seeing it Running.
	LegDelegateCreatedToRunning = "delegate_created_to_running"
	// LegDelegateRunningToProxyRunning is from the reconciler seeing the delegate Running to the
	// proxy's status Running written.
	LegDelegateRunningToProxyRunning = "delegate_running_to_proxy_running"
)

// startBuckets go from a fast start on a warm secondary to one that waited minutes for room.
var startBuckets = []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600}

var (
	podStart = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "flotilla_elected_pod_start_seconds",
		Help:    "Time from an elected pod's admission (its proxy's creationTimestamp, whole seconds) to its proxy's status Running written, per secondary; once per proxy.",
		Buckets: startBuckets,
	}, []string{"member_cluster"})
	podStartLegs = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "flotilla_elected_pod_start_leg_seconds",
		Help:    "The legs of flotilla_elected_pod_start_seconds, per secondary: admission_to_delegate_created, delegate_created_to_running, delegate_running_to_proxy_running; a leg whose start this process did not see is not observed.",
		Buckets: startBuckets,
	}, []string{"member_cluster", "leg"})
	delegateCreationErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flotilla_delegate_creation_errors_total",
		Help: "Delegates a secondary refused to create, per secondary and reason (the API error's StatusReason, Unknown for an error without one).",
	}, []string{"member_cluster", "reason"})
)

func init() { metrics.Registry.MustRegister(podStart, podStartLegs, delegateCreationErrors) }

// knownStatusReasons are the StatusReasons a creation error is counted by: Kubernetes' own, so the
// label's values stay a bounded set whatever a server answers.
var knownStatusReasons = map[metav1.StatusReason]bool{
	metav1.StatusReasonUnauthorized: true, metav1.StatusReasonForbidden: true, metav1.StatusReasonNotFound: true,
	metav1.StatusReasonAlreadyExists: true, metav1.StatusReasonConflict: true, metav1.StatusReasonGone: true,
	metav1.StatusReasonInvalid: true, metav1.StatusReasonServerTimeout: true, metav1.StatusReasonStoreReadError: true,
	metav1.StatusReasonTimeout: true, metav1.StatusReasonTooManyRequests: true, metav1.StatusReasonBadRequest: true,
	metav1.StatusReasonMethodNotAllowed: true, metav1.StatusReasonNotAcceptable: true,
	metav1.StatusReasonRequestEntityTooLarge: true, metav1.StatusReasonUnsupportedMediaType: true,
	metav1.StatusReasonInternalError: true, metav1.StatusReasonExpired: true, metav1.StatusReasonServiceUnavailable: true,
}

// creationErrorReason is the bounded reason a creation error is counted by.
func creationErrorReason(err error) string {
	reason := apierrors.ReasonForError(err)
	switch {
	case knownStatusReasons[reason]:
		return string(reason)
	case errors.Is(err, context.DeadlineExceeded):
		return string(metav1.StatusReasonTimeout)
	}
	return "Unknown"
}

// countCreationError counts a delegate a secondary refused.
func countCreationError(cluster string, err error) {
	delegateCreationErrors.WithLabelValues(cluster, creationErrorReason(err)).Inc()
}

// startTimes is what this process saw of one proxy's start.
type startTimes struct {
	uid types.UID
	// created is when this process created the delegate; running when it first saw it Running
	// (zero: not seen).
	created, running time.Time
	// observed: the start was observed; never twice per proxy.
	observed bool
}

// starts follows each proxy's start, in this process, until its status says Running, and
// observes it once (at most once per proxy UID in a process: a proxy whose status this process
// wrote Running is not observed again if a stale cache shows it Pending).
type starts struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*startTimes
}

// of is the entry of a proxy, anew when the name has a new UID. s.mu is held.
func (s *starts) of(proxy *corev1.Pod) *startTimes {
	if s.m == nil {
		s.m = map[types.NamespacedName]*startTimes{}
	}
	key := types.NamespacedName{Namespace: proxy.Namespace, Name: proxy.Name}
	t := s.m[key]
	if t == nil || t.uid != proxy.UID {
		t = &startTimes{uid: proxy.UID}
		s.m[key] = t
	}
	return t
}

// delegateCreated records when this process created a proxy's delegate, and observes the first leg.
func (s *starts) delegateCreated(proxy *corev1.Pod, cluster string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.of(proxy)
	if !t.created.IsZero() || t.observed {
		return
	}
	t.created = now
	podStartLegs.WithLabelValues(cluster, LegAdmissionToDelegateCreated).Observe(since(proxy.CreationTimestamp.Time, now))
}

// delegateRunning records when this process first saw a proxy's delegate Running.
func (s *starts) delegateRunning(proxy *corev1.Pod, cluster string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.of(proxy)
	if !t.running.IsZero() || t.observed {
		return
	}
	t.running = now
	if !t.created.IsZero() {
		podStartLegs.WithLabelValues(cluster, LegDelegateCreatedToRunning).Observe(since(t.created, now))
	}
}

// proxyRunning observes a proxy's start once its status Running is written.
func (s *starts) proxyRunning(proxy *corev1.Pod, cluster string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.of(proxy)
	if t.observed {
		return
	}
	t.observed = true
	podStart.WithLabelValues(cluster).Observe(since(proxy.CreationTimestamp.Time, now))
	if !t.running.IsZero() {
		podStartLegs.WithLabelValues(cluster, LegDelegateRunningToProxyRunning).Observe(since(t.running, now))
	}
}

// createdAt is when this process created the delegate of this incarnation of the proxy (zero: it
// did not, or the start is over).
func (s *starts) createdAt(proxy *corev1.Pod) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.m[types.NamespacedName{Namespace: proxy.Namespace, Name: proxy.Name}]
	if t == nil || t.uid != proxy.UID || t.observed {
		return time.Time{}
	}
	return t.created
}

// starting says whether this process created the delegate of the proxy (key, uid) and has seen
// neither the delegate Running nor written the proxy Running since.
func (s *starts) starting(key types.NamespacedName, uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.m[key]
	return t != nil && t.uid == uid && !t.created.IsZero() && t.running.IsZero() && !t.observed
}

// forget drops what is kept of a proxy that is gone.
func (s *starts) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

func since(from, to time.Time) float64 { return max(to.Sub(from).Seconds(), 0) }

// noCluster is the cluster label of proxies bound to no virtual node yet.
const noCluster = ""

// Metrics serves, at each scrape, gauges computed from the proxies the manager's cache holds:
// flotilla_proxies (per secondary and phase) and flotilla_proxies_without_delegate_oldest_seconds.
// Computed from the cache, they are right after deletions too (nothing to forget). It runs on the
// leader (a manager Runnable), registered on controller-runtime's registry while it runs.
type Metrics struct {
	// Reader lists proxies (the manager's cache).
	Reader client.Reader
	// Clock tells a proxy's age (default: the real one).
	Clock clock.PassiveClock
	// Timeout bounds one scrape's list (default 5 s).
	Timeout time.Duration

	ctx context.Context
}

var (
	_ prometheus.Collector = (*Metrics)(nil)
	_ manager.Runnable     = (*Metrics)(nil)

	proxiesDesc = prometheus.NewDesc("flotilla_proxies",
		"Proxies (elected pods) in the primary, per secondary (\"\" while bound to none) and phase.", []string{"member_cluster", "phase"}, nil)
	withoutDelegateDesc = prometheus.NewDesc("flotilla_proxies_without_delegate_oldest_seconds",
		"Age of the oldest proxy that is neither terminal nor terminating and has no delegate yet (its Delegated condition not True), per secondary (\"\" while bound to none); 0 when every proxy there has one.",
		[]string{"member_cluster"}, nil)
	phases = []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown}
)

// Start registers the collector and unregisters it when ctx ends.
func (p *Metrics) Start(ctx context.Context) error {
	p.ctx = ctx
	return leadermetrics.Serve(ctx, p, "proxy metrics")
}

// Describe sends the gauges' descriptions.
func (p *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- proxiesDesc
	ch <- withoutDelegateDesc
}

// Collect lists the proxies and sends the gauges; a failed list sends an invalid metric, which
// fails the scrape (Prometheus's up is 0) rather than report no proxies.
func (p *Metrics) Collect(ch chan<- prometheus.Metric) {
	var list corev1.PodList
	if !leadermetrics.List(p.ctx, p.Timeout, p.Reader, &list, ch, proxiesDesc, "proxies", client.MatchingLabels{flotillav1.LabelProxy: "true"}) {
		return
	}
	now := time.Now()
	if p.Clock != nil {
		now = p.Clock.Now()
	}
	counts, oldest := Counts(list.Items, now)
	for cluster, byPhase := range counts {
		for _, phase := range phases {
			ch <- prometheus.MustNewConstMetric(proxiesDesc, prometheus.GaugeValue, float64(byPhase[phase]), cluster, string(phase))
		}
	}
	for cluster, age := range oldest {
		ch <- prometheus.MustNewConstMetric(withoutDelegateDesc, prometheus.GaugeValue, age.Seconds(), cluster)
	}
}

// Counts counts proxies per cluster (their virtual node's; "" for none) and phase (an empty
// phase counts as Pending), and gives per cluster the age of the oldest proxy that waits for a
// delegate: neither terminal nor terminating, its Delegated condition not True (0 for none).
func Counts(proxies []corev1.Pod, now time.Time) (map[string]map[corev1.PodPhase]int, map[string]time.Duration) {
	counts := map[string]map[corev1.PodPhase]int{}
	oldest := map[string]time.Duration{}
	for i := range proxies {
		p := &proxies[i]
		cluster, ok := flotillav1.ClusterOfNode(p.Spec.NodeName)
		if !ok {
			cluster = noCluster
		}
		if counts[cluster] == nil {
			counts[cluster] = map[corev1.PodPhase]int{}
			oldest[cluster] = 0
		}
		phase := p.Status.Phase
		if phase == "" {
			phase = corev1.PodPending
		}
		counts[cluster][phase]++
		if phase == corev1.PodSucceeded || phase == corev1.PodFailed || !p.DeletionTimestamp.IsZero() || wasDelegated(p) {
			continue
		}
		oldest[cluster] = max(oldest[cluster], now.Sub(p.CreationTimestamp.Time))
	}
	return counts, oldest
}
