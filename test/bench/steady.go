package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// SteadyResult is the steady-load run (--steady-rate): pods created one by one at a fixed rate,
// as ClusterLoader2's pod startup latency measurement does, first directly (round-robin over the
// secondaries), then elected in the primary; per pod, the time from its creation (the start of
// its CREATE call) to its being seen Running and Ready.
type SteadyResult struct {
	Rate            float64   `json:"ratePerSecond"`
	DurationSeconds float64   `json:"durationSeconds"`
	Direct          SteadyRun `json:"direct"`
	Elected         SteadyRun `json:"elected"`
	// Added is the elected startup latency less the direct one, at each percentile.
	Added Percentiles `json:"addedMillis"`
	// DelegateStartup is the delegates' own, seen created to seen Running in their secondary;
	// ToDelegate and StatusBack are Flotilla's two legs as the elected run measures them: the
	// proxy seen created to its delegate seen created, the delegate seen Running to the proxy
	// seen Running.
	DelegateStartup Percentiles `json:"delegateStartupMillis"`
	ToDelegate      Percentiles `json:"ownToDelegateMillis"`
	StatusBack      Percentiles `json:"ownStatusBackMillis"`
	// Calls are the leader's requests and reconciles per elected pod over the elected part, and
	// the webhook's call as the primary's API server and the handler time it.
	Calls APICalls `json:"apiCallsElected"`
	// ManagerAvgCores is the leader's CPU time over the elected part (creation and deletion) over
	// its wall time.
	ManagerAvgCores float64 `json:"managerAverageCores"`
	// Sustained says whether the bed kept the rate directly: creations at 95% of the rate or more,
	// and the direct p99 within TargetDirectP99Millis. The targets hold only at such a rate.
	Sustained              bool    `json:"bedSustained"`
	TargetDirectP99Millis  float64 `json:"targetDirectP99Millis"`
	TargetAddedP50Millis   float64 `json:"targetAddedP50Millis"`
	TargetAddedP99Millis   float64 `json:"targetAddedP99Millis"`
	TargetElectedP99Millis float64 `json:"targetElectedP99Millis"`
}

// Percentiles are the p50, p90 and p99 of a sample, in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
}

// SteadyRun is one side of the steady-load run.
type SteadyRun struct {
	Mode string `json:"mode"`
	// Pods were created; FailedCreates were not (their CREATE failed).
	Pods          int `json:"pods"`
	FailedCreates int `json:"failedCreates"`
	// CreatedPerSecond is the achieved rate: pods created over the time from the first CREATE's
	// start to the last's; MaxLagMillis the most a CREATE started after its slot.
	CreatedPerSecond float64 `json:"createdPerSecond"`
	MaxLagMillis     float64 `json:"maxPacerLagMillis"`
	// CreateCall is the CREATE call's own time; Startup is from its start to the pod seen Running
	// and Ready. StartupFromTimestamp is the same from the pod's creationTimestamp (whole
	// seconds, so up to 1 s more), and TimestampOutside the pods whose creationTimestamp is not
	// within their CREATE call (the cross-check: 0 expected).
	CreateCall           Percentiles `json:"createCallMillis"`
	Startup              Percentiles `json:"startupMillis"`
	StartupFromTimestamp Percentiles `json:"startupFromCreationTimestampMillis"`
	TimestampOutside     int         `json:"creationTimestampOutsideCall"`
	// DeleteSeconds is from deleting the namespace's pods until none is left.
	DeleteSeconds float64 `json:"deleteSeconds"`
	clock         *podClock
}

// steadyPods is how many pods each side of the steady-load run creates.
func steadyPods(o options) int {
	if o.steadyRate <= 0 {
		return 0
	}
	return max(1, int(o.steadyRate*o.steadyDuration.Seconds()))
}

// measureSteady runs the steady-load measure, unless the options leave it out.
func (rep *Report) measureSteady(ctx context.Context, bed *testbed.Bed, mgr *benchManager, o options) (err error) {
	n := steadyPods(o)
	if n == 0 {
		return nil
	}
	s := &SteadyResult{Rate: o.steadyRate, DurationSeconds: o.steadyDuration.Seconds(), TargetDirectP99Millis: 5000,
		TargetAddedP50Millis: 100, TargetAddedP99Millis: 1000, TargetElectedP99Millis: 5000}
	secondaries := make([]target, len(bed.Secondaries))
	for i, c := range bed.Secondaries {
		secondaries[i] = target{cs: c.Clientset}
	}
	fmt.Printf("bench: steady load, %d pods directly at %g a second, round-robin over the %d secondaries...\n", n, o.steadyRate, len(secondaries))
	if s.Direct, err = steadyRun(ctx, "direct", secondaries, "bench-steady-direct", false, o.steadyRate, n); err != nil {
		return err
	}
	fmt.Printf("bench: steady load, %d pods elected from the primary at %g a second...\n", n, o.steadyRate)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	delegates := startDelegateWatch(wctx, bed, "bench-steady-elected")
	cpu, wall := procCPUSeconds(mgr.PID()), time.Now()
	calls := &callMeter{url: mgr.metricsURL, primaryHost: hostOf(bed.Primary.RESTConfig.Host), primary: bed.Primary.Clientset, pods: n}
	calls.mark()
	if s.Elected, err = steadyRun(ctx, "elected", []target{{cs: bed.Primary.Clientset}}, "bench-steady-elected", true, o.steadyRate, n); err != nil {
		return mgr.diedWith(err)
	}
	calls.mark()
	if calls.err != nil {
		return calls.err
	}
	s.Calls = calls.phase(0)
	s.ManagerAvgCores = round((procCPUSeconds(mgr.PID()) - cpu) / time.Since(wall).Seconds())
	s.derive(delegates)
	rep.Steady = s
	return nil
}

// derive fills in the added latency, the delegates' own and Flotilla's legs, and whether the
// bed sustained the rate.
func (s *SteadyResult) derive(delegates *delegateWatch) {
	d, e := s.Direct.Startup, s.Elected.Startup
	s.Added = Percentiles{P50: e.P50 - d.P50, P90: e.P90 - d.P90, P99: e.P99 - d.P99}
	there, home := delegates.legSamples(s.Elected.clock)
	s.ToDelegate, s.StatusBack = percentiles(there), percentiles(home)
	delegates.mu.Lock()
	s.DelegateStartup = percentiles(append([]float64(nil), delegates.latencies...))
	delegates.mu.Unlock()
	s.Sustained = s.Direct.FailedCreates == 0 && s.Direct.CreatedPerSecond >= 0.95*s.Rate && d.P99 <= s.TargetDirectP99Millis
}

// steadyCreate is one pod's CREATE: its key in the podClock ("<target>/<name>"), its slot, the
// call's start and end, the creationTimestamp it returned.
type steadyCreate struct {
	key             string
	due, start, end time.Time
	stamp           time.Time
	err             error
}

// steadyRun creates n pods in ns at rate a second, round-robin over the targets, waits until each
// is Running and Ready, summarises, and deletes them.
func steadyRun(ctx context.Context, mode string, targets []target, ns string, elect bool, rate float64, n int) (SteadyRun, error) {
	for _, t := range targets {
		if err := prepare(ctx, t.cs, ns, elect); err != nil {
			return SteadyRun{}, err
		}
	}
	clock := &podClock{n: n, ready: true, added: map[string]time.Time{}, running: map[string]time.Time{}, marked: map[string]time.Time{}, done: make(chan struct{})}
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	stores := watchPods(ictx, targets, ns, clock)
	creates := pace(ctx, targets, ns, elect, rate, n)
	made := 0
	var errs []error
	for _, c := range creates {
		if c.err != nil {
			errs = append(errs, c.err)
		} else if !c.start.IsZero() {
			made++
		}
	}
	if made == 0 {
		return SteadyRun{}, fmt.Errorf("steady %s: no pod created: %w", mode, errors.Join(errs...))
	}
	if len(errs) > 0 {
		fmt.Printf("bench: steady %s: %d CREATEs failed, the first: %v\n", mode, len(errs), errs[0])
	}
	clock.expect(made)
	select {
	case <-clock.done:
	case <-time.After(runTimeout(n)):
		clock.mu.Lock()
		defer clock.mu.Unlock()
		return SteadyRun{}, fmt.Errorf("steady %s: only %d of %d pods Running and Ready %s after the last creation", mode, len(clock.running), made, runTimeout(n))
	case <-ctx.Done():
		return SteadyRun{}, ctx.Err()
	}
	res := summarise(mode, clock, creates)
	res.FailedCreates = len(errs)
	deleted, err := deleteSteady(ctx, targets, ns, stores)
	if err != nil {
		return SteadyRun{}, fmt.Errorf("steady %s: %w", mode, err)
	}
	res.DeleteSeconds = round(deleted.Seconds())
	return res, nil
}

// watchPods starts an informer on ns in each target, each recording into the clock, and waits
// for their caches; it returns their stores.
func watchPods(ctx context.Context, targets []target, ns string, clock *podClock) []cache.Store {
	stores := make([]cache.Store, len(targets))
	for i, t := range targets {
		factory := informers.NewSharedInformerFactoryWithOptions(t.cs, 0, informers.WithNamespace(ns))
		inf := factory.Core().V1().Pods().Informer()
		stores[i] = inf.GetStore()
		record := clock.recorder(i)
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, o any) { record(o) }})
		factory.Start(ctx.Done())
		cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	}
	return stores
}

// pace creates n pods, pod i in target i mod len(targets) at its slot, i / rate seconds after the
// first, from max(4, rate) goroutines: a CREATE of up to a second does not hold the pace. A slot
// no goroutine is free for waits, and its CREATE starts late (MaxLagMillis says by how much).
func pace(ctx context.Context, targets []target, ns string, elect bool, rate float64, n int) []steadyCreate {
	creates := make([]steadyCreate, n)
	slots := make(chan int)
	var wg sync.WaitGroup
	for range max(4, int(math.Ceil(rate))) {
		wg.Go(func() {
			for i := range slots {
				t, c := i%len(targets), &creates[i]
				pod := steadyPod(fmt.Sprintf("steady-%05d", i), elect)
				c.key = fmt.Sprintf("%d/%s", t, pod.Name)
				c.start = time.Now()
				got, err := targets[t].cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
				c.end = time.Now()
				if err != nil {
					c.err = err
					continue
				}
				c.stamp = got.CreationTimestamp.Time
			}
		})
	}
	start := time.Now()
	for i := range n {
		creates[i].due = start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		timer := time.NewTimer(time.Until(creates[i].due))
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
		}
		if ctx.Err() != nil {
			break
		}
		slots <- i
	}
	close(slots)
	wg.Wait()
	return creates
}

// steadyPod is one pod of the steady-load run: the pod the other runs' Deployments create.
func steadyPod(name string, elect bool) *corev1.Pod {
	annotations := map[string]string{}
	if elect {
		annotations[flotillav1.AnnotationElect] = ""
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench"}, Annotations: annotations},
		Spec: benchPodSpec()}
}

// benchPodSpec is the spec of every bench pod.
func benchPodSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}}}
}

// summarise makes the run's figures from its CREATEs and its clock.
func summarise(mode string, clock *podClock, creates []steadyCreate) SteadyRun {
	clock.mu.Lock()
	defer clock.mu.Unlock()
	res := SteadyRun{Mode: mode, clock: clock}
	var startup, fromStamp, calls []float64
	var first, last time.Time
	var lag time.Duration
	for _, c := range creates {
		if c.err != nil || c.start.IsZero() {
			continue
		}
		res.Pods++
		if first.IsZero() || c.start.Before(first) {
			first = c.start
		}
		if c.start.After(last) {
			last = c.start
		}
		lag = max(lag, c.start.Sub(c.due))
		calls = append(calls, millis(c.end.Sub(c.start)))
		if c.stamp.Before(c.start.Truncate(time.Second)) || c.stamp.After(c.end) {
			res.TimestampOutside++
		}
		if r, ok := clock.running[c.key]; ok {
			startup = append(startup, millis(r.Sub(c.start)))
			fromStamp = append(fromStamp, millis(r.Sub(c.stamp)))
		}
	}
	if span := last.Sub(first).Seconds(); span > 0 {
		res.CreatedPerSecond = round(float64(res.Pods-1) / span)
	}
	res.MaxLagMillis = millis(lag)
	res.CreateCall, res.Startup, res.StartupFromTimestamp = percentiles(calls), percentiles(startup), percentiles(fromStamp)
	return res
}

// deleteSteady deletes the run's pods in each target and waits until the informers hold none. A
// DELETE of the whole collection can fail on a loaded API server (thousands of pods, one request):
// it is then issued again every 15 s until one succeeds.
func deleteSteady(ctx context.Context, targets []target, ns string, stores []cache.Store) (time.Duration, error) {
	start := time.Now()
	var failed bool
	var last time.Time
	deleteAll := func() {
		failed, last = false, time.Now()
		for _, t := range targets {
			if err := t.cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				fmt.Printf("bench: deleting the pods of %s failed, again in 15 s: %v\n", ns, err)
				failed = true
			}
		}
	}
	deleteAll()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Minute, true, func(context.Context) (bool, error) {
		for _, s := range stores {
			if len(s.ListKeys()) > 0 {
				if failed && time.Since(last) > 15*time.Second {
					deleteAll()
				}
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return 0, fmt.Errorf("pods left 10 minutes after the deletion: %w", err)
	}
	return time.Since(start), nil
}

// expect sets the pods the clock waits for, once the creations are done (some may have failed).
func (c *podClock) expect(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n = n
	if len(c.running) >= n {
		c.once.Do(func() { close(c.done) })
	}
}

// runningAndReady says whether a pod is Running with its Ready condition True.
func runningAndReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// legSamples are Flotilla's two legs (ms) over the elected pods the clock saw: proxy seen created
// to delegate seen created, and delegate seen Running to proxy seen Running.
func (w *delegateWatch) legSamples(proxies *podClock) (toDelegate, back []float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	proxies.mu.Lock()
	defer proxies.mu.Unlock()
	// Both clocks key by "<cluster>/<pod name>"; a delegate has its proxy's name.
	name := func(key string) string { return key[strings.IndexByte(key, '/')+1:] }
	byName := func(in map[string]time.Time) map[string]time.Time {
		out := make(map[string]time.Time, len(in))
		for key, at := range in {
			out[name(key)] = at
		}
		return out
	}
	added, running := byName(proxies.added), byName(proxies.running)
	for key, d := range w.createdAt {
		if a, ok := added[name(key)]; ok {
			toDelegate = append(toDelegate, millis(d.Sub(a)))
		}
	}
	for key, d := range w.runningAt {
		if r, ok := running[name(key)]; ok {
			back = append(back, millis(r.Sub(d)))
		}
	}
	return toDelegate, back
}

// percentiles sorts the sample and takes its p50, p90 and p99.
func percentiles(sample []float64) Percentiles {
	sort.Float64s(sample)
	return Percentiles{P50: percentile(sample, 0.5), P90: percentile(sample, 0.9), P99: percentile(sample, 0.99)}
}

func millis(d time.Duration) float64 { return float64(d.Milliseconds()) }

// printSteady prints the steady-load run, with each target met or not.
func printSteady(s *SteadyResult) {
	if s == nil {
		return
	}
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "not met"
	}
	fmt.Printf("\nsteady load: %g pods a second for %s, startup = CREATE's start to Running and Ready (ms)\n", s.Rate, time.Duration(s.DurationSeconds*float64(time.Second)))
	fmt.Printf("%-8s %6s %6s %10s %8s %8s %8s %10s %12s %10s\n", "MODE", "PODS", "FAILED", "CREATED/s", "P50", "P90", "P99", "MAXLAG", "CREATE P99", "DELETE(s)")
	for _, r := range []SteadyRun{s.Direct, s.Elected} {
		fmt.Printf("%-8s %6d %6d %10.2f %8.0f %8.0f %8.0f %10.0f %12.0f %10.2f\n", r.Mode, r.Pods, r.FailedCreates, r.CreatedPerSecond,
			r.Startup.P50, r.Startup.P90, r.Startup.P99, r.MaxLagMillis, r.CreateCall.P99, r.DeleteSeconds)
	}
	for _, r := range []SteadyRun{s.Direct, s.Elected} {
		fmt.Printf("cross-check, %s: from creationTimestamp p50 %.0f / p99 %.0f ms (whole seconds); %d creationTimestamps outside their CREATE call\n",
			r.Mode, r.StartupFromTimestamp.P50, r.StartupFromTimestamp.P99, r.TimestampOutside)
	}
	fmt.Printf("added (elected - direct): p50 %.0f, p90 %.0f, p99 %.0f ms\n", s.Added.P50, s.Added.P90, s.Added.P99)
	fmt.Printf("elected legs: delegates' own startup p50 %.0f / p99 %.0f ms; proxy created to delegate created p50 %.0f / p99 %.0f ms; delegate Running to proxy Running p50 %.0f / p99 %.0f ms; leader %.2f cores\n",
		s.DelegateStartup.P50, s.DelegateStartup.P99, s.ToDelegate.P50, s.ToDelegate.P99, s.StatusBack.P50, s.StatusBack.P99, s.ManagerAvgCores)
	c := s.Calls
	fmt.Printf("elected, per pod: %.2f status writes, %.2f Events into the primary, %.2f other requests to the secondaries than the delegate's create and delete, %.1f proxy reconciles; a webhook call %.0f ms as the API server times it, %.0f ms in the handler\n",
		c.ByResource["primary patch pods/status"], c.ByResource["primary create events"],
		others(c.ByResource, "secondary ", "secondary create pods", "secondary delete pods"), c.ProxyReconciles, c.WebhookMillis, c.WebhookHandlerMillis)
	fmt.Printf("bed sustained the rate directly: %s (created %.2f/s of %g/s asked, at least 95%%; direct p99 %.0f ms, within %.0f)\n",
		met(s.Sustained), s.Direct.CreatedPerSecond, s.Rate, s.Direct.Startup.P99, s.TargetDirectP99Millis)
	fmt.Printf("target added p50 <= %.0f ms: %s (%.0f)\n", s.TargetAddedP50Millis, met(s.Added.P50 <= s.TargetAddedP50Millis), s.Added.P50)
	fmt.Printf("target added p99 <= %.0f ms: %s (%.0f)\n", s.TargetAddedP99Millis, met(s.Added.P99 <= s.TargetAddedP99Millis), s.Added.P99)
	fmt.Printf("target elected p99 <= %.0f ms: %s (%.0f)\n", s.TargetElectedP99Millis, met(s.Elected.Startup.P99 <= s.TargetElectedP99Millis), s.Elected.Startup.P99)
}
