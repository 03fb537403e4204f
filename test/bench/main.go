// Command bench measures pod election against its floors, on a fresh local test bed: the same N
// pods created directly in one secondary, split evenly over the secondaries, then elected from the
// primary over them. It prints, for each, the time until all are Running, p50/p99 per-pod latency
// (create to Running as the creating cluster sees it), pods per second and the time to delete
// them all; for the elected run the manager's peak memory, CPU time and API calls per pod; also
// as JSON (--out, documented in docs/benchmarks.md).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/config"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
	"github.com/flotilla-dev/flotilla/webhook"
)

// Result is one measured run.
type Result struct {
	Mode          string  `json:"mode"`
	Pods          int     `json:"pods"`
	TotalSeconds  float64 `json:"totalSeconds"`
	P50Millis     float64 `json:"p50Millis"`
	P99Millis     float64 `json:"p99Millis"`
	PodsPerSecond float64 `json:"podsPerSecond"`
	// DeleteSeconds is from the Deployments' deletion (background propagation, as kubectl
	// deletes) until no pod of the run is left: for elected pods, no proxy, so no delegate.
	DeleteSeconds float64 `json:"deleteSeconds"`
	// clock is when each pod was seen added and Running (the elected run's legs read it).
	clock *podClock
}

// APICalls is the manager's own requests (its client-go metrics, rest_client_requests_total)
// during one phase of the elected run, per elected pod.
type APICalls struct {
	Primary     float64 `json:"primaryPerPod"`
	Secondaries float64 `json:"secondariesPerPod"`
	// ByMethod splits them by HTTP method: "primary GET", "secondaries PATCH"...
	ByMethod map[string]float64 `json:"byMethod"`
	// ByResource splits them by API server, verb and resource, from the manager's own
	// flotilla_api_requests_total: "primary patch pods/status", "secondary create pods"...
	ByResource map[string]float64 `json:"byResource"`
	// The proxy controller in the phase: reconciles per pod, their mean time, and the mean
	// time a proxy waited in its work queue (controller-runtime's metrics).
	ProxyReconciles      float64 `json:"proxyReconcilesPerPod"`
	ProxyReconcileMillis float64 `json:"proxyReconcileMeanMillis"`
	ProxyQueueMillis     float64 `json:"proxyQueueWaitMeanMillis"`
	// PrimaryServed is what the primary's API server served in the phase, from every client (its
	// apiserver_request_total), per pod, by "resource[/subresource] VERB", for pods, Events and
	// nodes: which writes Flotilla's calls above are, and what the primary's own controllers add.
	PrimaryServed map[string]float64 `json:"primaryServedPerPod"`
	// In the primary's API server over the phase: the mean time of a pod CREATE (every client's),
	// and of one call of an admission webhook (Flotilla's is the only one on the bed).
	PodCreateMillis float64 `json:"primaryPodCreateMeanMillis"`
	WebhookMillis   float64 `json:"primaryWebhookMeanMillis"`
	// The same call as the manager's webhook server saw it, from its request to its answer.
	WebhookHandlerMillis float64 `json:"webhookHandlerMeanMillis"`
}

// Report is what the benchmark prints and writes.
type Report struct {
	Pods     int `json:"pods"`
	Clusters int `json:"clusters"`
	// Pull: every secondary was reached through its agent's tunnel (--pull).
	Pull bool `json:"pull"`
	// Direct is the N pods created in one secondary; SplitDirect the same N split evenly over
	// every secondary, created in parallel: what a user could reach by hand with the same
	// clusters, the floor Flotilla steers by (RatioToSplit).
	Direct         Result  `json:"direct"`
	SplitDirect    Result  `json:"splitDirect"`
	Elected        Result  `json:"elected"`
	Ratio          float64 `json:"ratioElectedToDirect"`
	RatioToSplit   float64 `json:"ratioElectedToSplitDirect"`
	AddedP50Millis float64 `json:"addedP50Millis"`
	// DelegateP50Millis is the delegates' own p50, created to Running in their secondary (the path
	// a direct pod takes there); OwnAddedP50Millis is the elected p50 less it: Flotilla's own part
	// (the webhook, the delegate's creation, the status back).
	DelegateP50Millis float64 `json:"delegateP50Millis"`
	OwnAddedP50Millis float64 `json:"ownAddedP50Millis"`
	// Flotilla's own part in its two legs, each a p50 over the elected pods: from the proxy's
	// creation to its delegate's (the webhook's answer is before the first: the proxy is created
	// bound), and from the delegate seen Running in its secondary to the proxy seen Running.
	ToDelegateP50Millis float64 `json:"ownToDelegateP50Millis"`
	StatusBackP50Millis float64 `json:"ownStatusBackP50Millis"`
	ManagerPeakMiB      float64 `json:"managerPeakMiB"`
	// The leader's Go heap in use right after a GC, with every elected pod Running: what its caches
	// and queues hold, without the garbage the peak resident figure also counts.
	ManagerLiveHeapMiB float64 `json:"managerLiveHeapMiB"`
	// The same before the elected run (the secondaries joined, no elected pod), and what each
	// elected pod adds to it: (live - idle) / pods.
	ManagerIdleHeapMiB float64 `json:"managerIdleHeapMiB"`
	HeapKiBPerPod      float64 `json:"managerHeapKiBPerElectedPod"`
	// BedMiB is the resident memory of all the bed's processes (API servers, etcds, controller
	// managers, schedulers, kwoks, metrics-servers) once it is up, before any run.
	BedMiB float64 `json:"bedMiB"`
	// RatioDeleteToSplit is the elected run's DeleteSeconds over the split-direct run's.
	RatioDeleteToSplit float64 `json:"ratioDeleteElectedToSplitDirect"`
	// The leader's CPU time over the elected run (creation and deletion), per 1000 pods, and as
	// an average of cores over that run's wall time.
	ManagerCPUSecondsPer1000 float64 `json:"managerCPUSecondsPer1000Pods"`
	ManagerAvgCores          float64 `json:"managerAverageCores"`
	// The leader's API calls per elected pod, while they were created and while they were deleted.
	CreateCalls APICalls `json:"apiCallsCreate"`
	DeleteCalls APICalls `json:"apiCallsDelete"`
	// WorkTargets are the work per elected pod against its targets (workTargets).
	WorkTargets []Target `json:"workTargets"`
	// A second replica, standing by (not leader) through the elected run: its resident memory
	// when it was ready and at the end, and its peak, against the delegate events it lived through.
	StandbyStartMiB      float64  `json:"standbyStartMiB"`
	StandbyEndMiB        float64  `json:"standbyEndMiB"`
	StandbyPeakMiB       float64  `json:"standbyPeakMiB"`
	DelegateEvents       int      `json:"delegateEvents"`
	DelegatesPerCluster  []int    `json:"delegatesPerCluster"`
	Phases               []string `json:"phases"`
	TargetRatio          float64  `json:"targetRatio"`
	TargetRatioToSplit   float64  `json:"targetRatioToSplitDirect"`
	TargetAddedP50Millis float64  `json:"targetAddedP50Millis"`
	TargetManagerMiB     float64  `json:"targetManagerMiB"`
	TargetManagerCores   float64  `json:"targetManagerAverageCores"`
	TargetRatioDelete    float64  `json:"targetRatioDelete"`
	// MCS is the Multi-Cluster Services run.
	MCS *MCSResult `json:"mcs,omitempty"`
	// Tracing is the manager's tracing cost (--tracing).
	Tracing *TracingResult `json:"tracing,omitempty"`
	// Steady is the steady-load run (--steady-rate).
	Steady *SteadyResult `json:"steady,omitempty"`
}

func main() {
	var o options
	flag.IntVar(&o.pods, "pods", 200, "pods in each run")
	flag.IntVar(&o.clusters, "clusters", 2, "secondaries (more than 2: one fake node each, to keep the bed small)")
	flag.StringVar(&o.out, "out", "", "write the report as JSON to this file")
	flag.BoolVar(&o.keep, "keep", false, "keep the bed's work dir")
	flag.BoolVar(&o.skipDirect, "skip-direct", false, "leave out the run of all pods in one secondary (at 10,000 pods it loads the machine for 8 minutes and is not the floor steered by)")
	flag.BoolVar(&o.skipSplit, "skip-split", false, "leave out the split-direct floor too (no ratios): a run for the manager's memory and CPU only")
	flag.StringVar(&o.memoryLimit, "memory-limit", "512Mi", "the managers' container memory limit, as the chart would give it (manager.resources.limits.memory; its default): they run with the soft memory limit it sets")
	flag.DurationVar(&o.renewDeadline, "renew-deadline", 10*time.Second, "the managers' --leader-elect-renew-deadline (their lease duration is 1.5 times it): on 2 cores, 10 secondaries starting 10,000 pods at once can keep the primary's API server from answering the leader's Lease read for longer than the default 10 s, and a leader that cannot renew exits (in a cluster its pod would restart)")
	flag.IntVar(&o.mcsEndpoints, "mcs-endpoints", 1000, "endpoints of the Multi-Cluster Services run, split over every cluster of the set (0: no run)")
	flag.BoolVar(&o.tracing, "tracing", false, "start the bed with Jaeger and tracing API servers, and after the other runs measure the elected run twice more with one manager each: untraced, then tracing (sampling 1.0)")
	flag.Float64Var(&o.steadyRate, "steady-rate", 0, "the steady-load run: pods created one by one at this rate a second, directly then elected, their startup latency percentiles (0: no run)")
	flag.DurationVar(&o.steadyDuration, "steady-duration", 5*time.Minute, "how long the steady-load run creates pods, directly and again elected")
	flag.BoolVar(&o.pull, "pull", false, "join every secondary in pull mode: the managers reach each only through the tunnel of an agent on this host (loopback), as a secondary they cannot dial")
	flag.Parse()
	if o.clusters < 1 || o.pods < o.clusters {
		fmt.Fprintln(os.Stderr, "bench: --clusters must be at least 1 and at most --pods")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// options are the bench's flags.
type options struct {
	pods, clusters int
	out            string
	keep           bool
	// skipDirect leaves the run in one secondary out, skipSplit the split-direct floor.
	skipDirect, skipSplit bool
	// memoryLimit is the managers' container memory limit.
	memoryLimit string
	// renewDeadline is the managers' leader-election renewal deadline.
	renewDeadline time.Duration
	// mcsEndpoints are the endpoints of the Multi-Cluster Services run (0: no run).
	mcsEndpoints int
	// tracing measures the manager's tracing cost; tracingEndpoint is a manager's --tracing-endpoint.
	tracing         bool
	tracingEndpoint string
	// steadyRate (pods a second, 0: no run) and steadyDuration are the steady-load run's.
	steadyRate     float64
	steadyDuration time.Duration
	// pull joins every secondary in pull mode, reached through agents on this host.
	pull bool
	// managerArgs are more flags for every manager (the tunnel's).
	managerArgs []string
}

func run(ctx context.Context, o options) (err error) {
	n, clusters, out, keep := o.pods, o.clusters, o.out, o.keep
	dir, err := os.MkdirTemp("", "flotilla-bench-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	bin := filepath.Join(dir, "bin")
	if err := build(ctx, bin); err != nil {
		return err
	}
	fmt.Printf("bench: starting a primary and %d secondaries...\n", clusters)
	// Past 2 secondaries the bed is lean: one fake node each and no metrics-server.
	nodes, lean := 2, clusters > 2
	if lean {
		nodes = 1
	}
	bed, err := testbed.Start(ctx, testbed.Options{WorkDir: filepath.Join(dir, "bed"), Log: os.Stdout,
		Secondaries: clusters, NodesPerSecondary: nodes, NoMetricsServer: lean, Tracing: o.tracing,
		Node: testbed.NodeSize{CPU: "1000", Memory: "4Ti", Pods: strconv.Itoa(max(n, steadyPods(o)) + 50)}})
	if err != nil {
		return err
	}
	defer func() {
		if serr := bed.Stop(context.WithoutCancel(ctx)); serr != nil && err == nil {
			err = serr
		}
	}()
	bedMiB := 0.0
	for _, pid := range bed.PIDs() {
		bedMiB += procMiB(pid, "VmRSS:")
	}
	if err := prepareBed(ctx, bed, o); err != nil {
		return err
	}
	mgr, leaderWebhook, tunnel, err := startAndJoin(ctx, bed, bin, dir, &o)
	if err != nil {
		return err
	}
	defer func() { _ = mgr.Stop(20 * time.Second) }()
	defer tunnel.stop()
	if err := waitNodesReady(ctx, bed); err != nil {
		return err
	}
	// A standby replica (the first holds the leader Lease), as the chart's second replica is: its
	// memory must stay flat whatever the number of delegate events. Its webhook URL stays the
	// leader's, so the configuration both write keeps pointing there.
	standbyDir := filepath.Join(dir, "standby")
	standby, _, err := startManager(filepath.Join(bin, "flotilla-manager"), bed.Primary.KubeconfigPath, standbyDir, leaderWebhook, o)
	if err != nil {
		return err
	}
	defer func() { _ = standby.Stop(20 * time.Second) }()
	time.Sleep(15 * time.Second) // its informers synced, its registry fed

	rep := Report{Pods: n, Clusters: clusters, Pull: o.pull, TargetRatio: 1.5, TargetRatioToSplit: 1.2, TargetAddedP50Millis: 100, TargetManagerMiB: 150,
		TargetManagerCores: 0.5, TargetRatioDelete: 1.2, StandbyStartMiB: procMiB(standby.PID(), "VmRSS:"), BedMiB: round(bedMiB)}
	if n >= 10000 { // the scale targets at 10,000 elected pods (over 10 secondaries)
		rep.TargetRatioToSplit, rep.TargetManagerMiB = 1.3, 300
	}
	if err := rep.measureFloors(ctx, bed, o); err != nil {
		return err
	}
	fmt.Printf("bench: %d pods elected from the primary over %d secondaries...\n", n, clusters)
	if err := measureElected(ctx, bed, mgr, &rep, heapProfilePath(dir, out)); err != nil {
		return mgr.diedWith(err)
	}
	rep.derive(mgr, standby)
	rep.WorkTargets = append(rep.WorkTargets, costTargets(rep)...)
	if err := rep.measureLoads(ctx, bed, mgr, o); err != nil {
		return err
	}
	if err := rep.measureTracing(ctx, bed, []*benchManager{standby, mgr}, bin, dir, o); err != nil {
		return err
	}
	print(rep)
	return writeReport(rep, out)
}

// prepareBed installs the CRDs the manager needs before it starts (it runs the MCS controller
// only with the MCS API's) and its system namespace.
func prepareBed(ctx context.Context, bed *testbed.Bed, o options) error {
	if err := installCRDs(ctx, bed.Primary); err != nil {
		return err
	}
	if o.mcsEndpoints > 0 {
		if err := installMCSCRDs(ctx, bed); err != nil {
			return err
		}
	}
	_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: flotillav1.SystemNamespace}}, metav1.CreateOptions{})
	return err
}

// measureLoads runs the steady-load and the Multi-Cluster Services measures, unless the options
// leave them out.
func (rep *Report) measureLoads(ctx context.Context, bed *testbed.Bed, mgr *benchManager, o options) error {
	if err := rep.measureSteady(ctx, bed, mgr, o); err != nil {
		return err
	}
	return rep.measureServices(ctx, bed, mgr, o)
}

// measureServices runs the Multi-Cluster Services measurement, unless the options leave it out.
func (rep *Report) measureServices(ctx context.Context, bed *testbed.Bed, mgr *benchManager, o options) (err error) {
	if o.mcsEndpoints <= 0 {
		return nil
	}
	fmt.Printf("bench: %d endpoints exported from %d clusters...\n", o.mcsEndpoints, len(bed.Clusters()))
	if rep.MCS, err = measureMCS(ctx, bed, o.mcsEndpoints); err != nil {
		return mgr.diedWith(err)
	}
	return nil
}

// derive fills in the ratios and the managers' memory once the runs are done.
// measureFloors measures what the elected run is compared with, unless the options leave it out:
// all pods directly in one secondary, and split over the secondaries in parallel.
func (rep *Report) measureFloors(ctx context.Context, bed *testbed.Bed, o options) (err error) {
	if !o.skipDirect {
		fmt.Printf("bench: %d pods directly in %s...\n", o.pods, bed.Secondaries[0].Name)
		if rep.Direct, err = measure(ctx, "direct", []target{{bed.Secondaries[0].Clientset, o.pods}}, "bench-direct", false, nil, nil); err != nil {
			return err
		}
	}
	if !o.skipSplit {
		fmt.Printf("bench: %d pods directly, split over the %d secondaries in parallel...\n", o.pods, o.clusters)
		if rep.SplitDirect, err = measure(ctx, "split", splitOver(bed.Secondaries, o.pods), "bench-split", false, nil, nil); err != nil {
			return err
		}
	}
	return nil
}

func (rep *Report) derive(mgr, standby *benchManager) {
	if rep.Direct.TotalSeconds > 0 {
		rep.Ratio = rep.Elected.TotalSeconds / rep.Direct.TotalSeconds
		rep.AddedP50Millis = rep.Elected.P50Millis - rep.Direct.P50Millis
	}
	if rep.SplitDirect.TotalSeconds > 0 {
		rep.RatioToSplit = round(rep.Elected.TotalSeconds / rep.SplitDirect.TotalSeconds)
		rep.RatioDeleteToSplit = round(rep.Elected.DeleteSeconds / rep.SplitDirect.DeleteSeconds)
	}
	rep.OwnAddedP50Millis = rep.Elected.P50Millis - rep.DelegateP50Millis
	rep.ManagerPeakMiB = procMiB(mgr.PID(), "VmHWM:")
	rep.HeapKiBPerPod = round((rep.ManagerLiveHeapMiB - rep.ManagerIdleHeapMiB) * 1024 / float64(rep.Pods))
	rep.StandbyEndMiB, rep.StandbyPeakMiB = procMiB(standby.PID(), "VmRSS:"), procMiB(standby.PID(), "VmHWM:")
}

// measureElected runs the elected measure with the leader's CPU time and API calls around it.
func measureElected(ctx context.Context, bed *testbed.Bed, mgr *benchManager, rep *Report, heapPath string) (err error) {
	n := rep.Pods
	if _, err := mgr.gcHeap(ctx); err != nil {
		return err
	}
	if rep.ManagerIdleHeapMiB, err = heapInUseMiB(mgr.metricsURL); err != nil {
		return err
	}
	var phases []string
	delegates := startDelegateWatch(ctx, bed, "bench-elected")
	calls := &callMeter{url: mgr.metricsURL, primaryHost: hostOf(bed.Primary.RESTConfig.Host), primary: bed.Primary.Clientset, pods: n}
	cpuBefore, wallBefore := procCPUSeconds(mgr.PID()), time.Now()
	calls.mark()
	created := func() {
		calls.mark()
		if rep.DelegatesPerCluster, err = delegatesPerCluster(ctx, bed); err != nil {
			calls.err = err
		}
		// The profile's own GC first: the heap gauge then says what is live.
		if err := mgr.heapProfile(ctx, heapPath); err != nil {
			calls.err = err
		} else if rep.ManagerLiveHeapMiB, err = heapInUseMiB(mgr.metricsURL); err != nil {
			calls.err = err
		}
		delegates.mu.Lock()
		delegates.deleteStart = time.Now() // deletion begins as created returns
		delegates.mu.Unlock()
	}
	if rep.Elected, err = measure(ctx, "elected", []target{{bed.Primary.Clientset, n}}, "bench-elected", true, &phases, created); err != nil {
		return err
	}
	calls.mark()
	cpu := procCPUSeconds(mgr.PID()) - cpuBefore
	rep.ManagerCPUSecondsPer1000 = round(cpu * 1000 / float64(n))
	rep.ManagerAvgCores = round(cpu / time.Since(wallBefore).Seconds())
	if err := calls.err; err != nil {
		return err
	}
	rep.CreateCalls, rep.DeleteCalls = calls.phase(0), calls.phase(1)
	rep.WorkTargets = workTargets(rep.CreateCalls, rep.DeleteCalls)
	rep.Phases = append(phases, delegates.phases(n)...)
	rep.DelegateEvents = delegates.events()
	rep.DelegateP50Millis = delegates.p50()
	rep.ToDelegateP50Millis, rep.StatusBackP50Millis = delegates.legs(rep.Elected.clock)
	return nil
}

// delegatesPerCluster counts the elected run's delegates in each secondary.
func delegatesPerCluster(ctx context.Context, bed *testbed.Bed) ([]int, error) {
	var out []int
	for _, c := range bed.Secondaries {
		pods, err := c.Clientset.CoreV1().Pods("bench-elected").List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		out = append(out, len(pods.Items))
	}
	return out, nil
}

// writeReport writes the report as JSON to out ("": nowhere).
func writeReport(rep Report, out string) error {
	if out == "" {
		return nil
	}
	raw, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(out, append(raw, '\n'), 0o600); err != nil {
		return err
	}
	fmt.Println("bench: report written to", out)
	return nil
}

// delegateWatch records when delegates appear and run in the secondaries: where the time of an
// elected pod goes (before the delegate exists, in the secondary, or in reporting status back).
type delegateWatch struct {
	mu               sync.Mutex
	start            time.Time
	created, running []time.Time
	// By cluster and delegate name ("secondary1/bench-..."; a delegate has its proxy's name):
	// when it was first seen, and first seen Running.
	createdAt, runningAt map[string]time.Time
	latencies            []float64 // per delegate, created to Running in its secondary (ms)
	deleteStart          time.Time // when the elected run's deletion began
	gone                 []time.Time
	count                int // delegate events seen (adds and updates)
}

// events is how many delegate events the secondaries sent (adds and updates).
func (w *delegateWatch) events() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.count
}

func startDelegateWatch(ctx context.Context, bed *testbed.Bed, ns string) *delegateWatch {
	w := &delegateWatch{start: time.Now(), createdAt: map[string]time.Time{}, runningAt: map[string]time.Time{}}
	for _, c := range bed.Secondaries {
		record := func(obj any) {
			p, ok := obj.(*corev1.Pod)
			if !ok {
				return
			}
			now := time.Now()
			w.mu.Lock()
			defer w.mu.Unlock()
			w.count++
			key := c.Name + "/" + p.Name
			if _, seen := w.createdAt[key]; !seen {
				w.created = append(w.created, now)
				w.createdAt[key] = now
			}
			if _, ran := w.runningAt[key]; !ran && p.Status.Phase == corev1.PodRunning {
				w.running = append(w.running, now)
				w.runningAt[key] = now
				w.latencies = append(w.latencies, float64(now.Sub(w.createdAt[key]).Milliseconds()))
			}
		}
		factory := informers.NewSharedInformerFactoryWithOptions(c.Clientset, 0, informers.WithNamespace(ns))
		inf := factory.Core().V1().Pods().Informer()
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, o any) { record(o) },
			DeleteFunc: func(any) {
				w.mu.Lock()
				defer w.mu.Unlock()
				w.gone = append(w.gone, time.Now())
			}})
		factory.Start(ctx.Done())
	}
	return w
}

// quietStart is the quiet start the bench gives the manager (--quiet-start; the manager's own
// default): a delegate Running later costs its proxy a second status write and a look at its
// Events.
const quietStart = 15 * time.Second

// p50 is the delegates' p50 from created to Running in their secondary (ms).
func (w *delegateWatch) p50() float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	sort.Float64s(w.latencies)
	return percentile(w.latencies, 0.5)
}

// legs are the p50s of Flotilla's two legs over the elected pods the clock saw (ms): proxy
// created to delegate created, and delegate Running to proxy Running.
func (w *delegateWatch) legs(proxies *podClock) (toDelegate, back float64) {
	if proxies == nil {
		return 0, 0
	}
	there, home := w.legSamples(proxies)
	sort.Float64s(there)
	sort.Float64s(home)
	return percentile(there, 0.5), percentile(home, 0.5)
}

// phases says when the n-th delegate was created and was Running, from the Deployment's creation.
func (w *delegateWatch) phases(n int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	at := func(list []time.Time) string {
		if len(list) < n {
			return fmt.Sprintf("only %d", len(list))
		}
		sort.Slice(list, func(i, j int) bool { return list[i].Before(list[j]) })
		return fmt.Sprintf("%.1fs", list[n-1].Sub(w.start).Seconds())
	}
	sort.Float64s(w.latencies)
	gone := "only " + strconv.Itoa(len(w.gone))
	if len(w.gone) >= n && !w.deleteStart.IsZero() {
		sort.Slice(w.gone, func(i, j int) bool { return w.gone[i].Before(w.gone[j]) })
		gone = fmt.Sprintf("%.1fs", w.gone[n-1].Sub(w.deleteStart).Seconds())
	}
	slow := 0
	for _, l := range w.latencies {
		if l > float64(quietStart.Milliseconds()) {
			slow++
		}
	}
	return []string{"deleting: delegates all gone from their secondaries after " + gone, "delegates: all created after " + at(w.created), "delegates: all Running in their secondaries after " + at(w.running),
		fmt.Sprintf("delegates: p50 created to Running in their secondary %.0f ms (the same path as a direct pod's)", percentile(w.latencies, 0.5)),
		fmt.Sprintf("delegates: %d of %d Running more than %.0f s after their creation (a slow start: its proxy is written Pending and Delegated, its Events looked at)",
			slow, len(w.latencies), quietStart.Seconds())}
}

func build(ctx context.Context, bin string) error {
	for name, pkg := range map[string]string{"flotilla-manager": "./cmd/flotilla-manager", "flotillactl": "./cmd/flotillactl"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(bin, name), pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building %s (run from the repository root): %w", pkg, err)
		}
	}
	return nil
}

// measure creates a Deployment of n pods and records, per pod, when it was added and when it was
// first seen Running, with an informer on the namespace (watch events, no polling).
// target is one cluster a run creates pods in, and how many.
type target struct {
	cs   kubernetes.Interface
	pods int
}

// splitOver splits n pods evenly over the clusters (the first ones take the remainder).
func splitOver(clusters []*testbed.Cluster, n int) []target {
	out := make([]target, len(clusters))
	for i, c := range clusters {
		out[i] = target{c.Clientset, n / len(clusters)}
		if i < n%len(clusters) {
			out[i].pods++
		}
	}
	return out
}

// measure creates a Deployment of each target's pods in its cluster, all at once, and times them
// until every pod of every target is Running (each pod from its creation to Running); then deletes
// the Deployments and times them until no pod is left. created, when given, is called between.
func measure(ctx context.Context, mode string, targets []target, ns string, elect bool, phases *[]string, created func()) (Result, error) {
	n := 0
	for _, t := range targets {
		n += t.pods
		if err := prepare(ctx, t.cs, ns, elect); err != nil {
			return Result{}, err
		}
	}
	clock := &podClock{n: n, added: map[string]time.Time{}, running: map[string]time.Time{}, marked: map[string]time.Time{}, done: make(chan struct{})}
	mu, added, running, done := &clock.mu, clock.added, clock.running, clock.done
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	stores := watchPods(ictx, targets, ns, clock)

	annotations := map[string]string{}
	if elect {
		annotations[flotillav1.AnnotationElect] = ""
	}
	sel := map[string]string{"app": "bench"}
	deployment := func(replicas int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Spec: appsv1.DeploymentSpec{
			Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: annotations},
				Spec: benchPodSpec()},
		}}
	}
	start := time.Now()
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			_, errs[i] = t.cs.AppsV1().Deployments(ns).Create(ctx, deployment(int32(t.pods)), metav1.CreateOptions{})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Result{}, err
	}
	select {
	case <-done:
	case <-time.After(runTimeout(n)):
		mu.Lock()
		defer mu.Unlock()
		return Result{}, fmt.Errorf("%s: only %d of %d pods Running after %s", mode, len(running), n, runTimeout(n))
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	total := time.Since(start)
	mu.Lock()
	lat, lastAdded := latencies(added, running)
	if phases != nil {
		*phases = append(*phases, fmt.Sprintf("last pod created by its ReplicaSet after %.1fs", lastAdded.Sub(start).Seconds()),
			fmt.Sprintf("all %d Running after %.1fs", n, total.Seconds()))
	}
	res := Result{Mode: mode, Pods: n, TotalSeconds: round(total.Seconds()), P50Millis: percentile(lat, 0.5),
		P99Millis: percentile(lat, 0.99), PodsPerSecond: round(float64(n) / total.Seconds()), clock: clock}
	mu.Unlock()
	if created != nil {
		created()
	}
	deleteStart := time.Now()
	deleted, err := deleteAll(ctx, targets, ns, stores)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", mode, err)
	}
	res.DeleteSeconds = round(deleted.Seconds())
	if phases != nil {
		*phases = append(*phases, fmt.Sprintf("deleting: the last pod marked for deletion (by the garbage collector) after %.1fs", clock.lastMarked().Sub(deleteStart).Seconds()),
			fmt.Sprintf("deleting: all %d deleted after %.1fs", n, deleted.Seconds()))
	}
	return res, nil
}

// podClock records, per pod of a run (by cluster index and name), when it was added, first seen
// Running and first seen deleting; done closes when all n are Running.
type podClock struct {
	n int
	// ready: a pod counts as Running once also Ready.
	ready                  bool
	mu                     sync.Mutex
	added, running, marked map[string]time.Time
	done                   chan struct{}
	once                   sync.Once
}

// recorder is the informer handler of one cluster's pods.
func (c *podClock) recorder(cluster int) func(obj any) {
	return func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		key := strconv.Itoa(cluster) + "/" + p.Name
		now := time.Now()
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.added[key]; !ok {
			c.added[key] = now
		}
		if _, ok := c.marked[key]; !ok && p.DeletionTimestamp != nil {
			c.marked[key] = now
		}
		if _, ok := c.running[key]; !ok && p.Status.Phase == corev1.PodRunning && (!c.ready || runningAndReady(p)) {
			c.running[key] = now
			if len(c.running) == c.n {
				c.once.Do(func() { close(c.done) })
			}
		}
	}
}

// lastMarked is when the last pod was first seen deleting.
func (c *podClock) lastMarked() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var last time.Time
	for _, at := range c.marked {
		if at.After(last) {
			last = at
		}
	}
	return last
}

// runTimeout bounds one run's creation, and its deletion: 10 minutes, and one more per 1000 pods
// (10,000 elected pods over 10 secondaries took longer than 10 minutes to create).
func runTimeout(pods int) time.Duration {
	return 10*time.Minute + time.Duration(pods/1000)*time.Minute
}

// latencies are each pod's milliseconds from added to running, sorted, and the last pod's add.
func latencies(added, running map[string]time.Time) (lat []float64, lastAdded time.Time) {
	for key, r := range running {
		lat = append(lat, float64(r.Sub(added[key]).Milliseconds()))
		if added[key].After(lastAdded) {
			lastAdded = added[key]
		}
	}
	sort.Float64s(lat)
	return lat, lastAdded
}

// deleteAll deletes each target's Deployment, as kubectl delete does (background propagation),
// and waits until the pod informers hold no pod.
func deleteAll(ctx context.Context, targets []target, ns string, stores []cache.Store) (time.Duration, error) {
	start := time.Now()
	n := 0
	for _, t := range targets {
		n += t.pods
	}
	background := metav1.DeletePropagationBackground
	for _, t := range targets {
		if err := t.cs.AppsV1().Deployments(ns).Delete(ctx, "bench", metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
			return 0, fmt.Errorf("deleting the Deployment: %w", err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, runTimeout(n), true, func(context.Context) (bool, error) {
		for _, s := range stores {
			if len(s.ListKeys()) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return 0, fmt.Errorf("pods left %s after the deletion: %w", runTimeout(n), err)
	}
	return time.Since(start), nil
}

// prepare makes the run's namespace in a cluster and waits for its default ServiceAccount, as a
// user applying into a ready namespace would.
func prepare(ctx context.Context, cs kubernetes.Interface, ns string, elect bool) error {
	labels := map[string]string{}
	if elect {
		labels[flotillav1.LabelEnabled] = "true"
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func round(f float64) float64 { return float64(int(f*100+0.5)) / 100 }

// procMiB reads a memory figure of a process (VmHWM: peak resident, VmRSS: resident now).
func procMiB(pid int, field string) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, field) {
			f := strings.Fields(line)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return round(kb / 1024)
		}
	}
	return 0
}

func print(r Report) {
	fmt.Printf("\n%-8s %6s %10s %10s %10s %8s %10s\n", "MODE", "PODS", "TOTAL(s)", "P50(ms)", "P99(ms)", "PODS/s", "DELETE(s)")
	for _, x := range []Result{r.Direct, r.SplitDirect, r.Elected} {
		fmt.Printf("%-8s %6d %10.2f %10.0f %10.0f %8.1f %10.2f\n", x.Mode, x.Pods, x.TotalSeconds, x.P50Millis, x.P99Millis, x.PodsPerSecond, x.DeleteSeconds)
	}
	reached := "dialled"
	if r.Pull {
		reached = "each through its agent's tunnel"
	}
	fmt.Printf("\nratio elected/split-direct: %.2f (target <= %.1f; %d secondaries, %s)\n", r.RatioToSplit, r.TargetRatioToSplit, r.Clusters, reached)
	fmt.Printf("ratio elected/direct: %.2f (target <= %.1f)\n", r.Ratio, r.TargetRatio)
	fmt.Printf("added p50 latency:    %.0f ms against direct; Flotilla's own %.0f ms (elected p50 less the delegates' own %.0f ms; target <= %.0f)\n",
		r.AddedP50Millis, r.OwnAddedP50Millis, r.DelegateP50Millis, r.TargetAddedP50Millis)
	fmt.Printf("Flotilla's own legs:  proxy created to delegate created p50 %.0f ms, delegate Running to proxy Running p50 %.0f ms\n",
		r.ToDelegateP50Millis, r.StatusBackP50Millis)
	fmt.Printf("delete elected/split: %.2f (target <= %.1f)\n", r.RatioDeleteToSplit, r.TargetRatioDelete)
	fmt.Printf("manager peak memory:  %.1f MiB (target <= %.0f); live heap %.1f MiB idle, %.1f MiB with all Running (%.1f KiB per elected pod)\n",
		r.ManagerPeakMiB, r.TargetManagerMiB, r.ManagerIdleHeapMiB, r.ManagerLiveHeapMiB, r.HeapKiBPerPod)
	fmt.Printf("manager CPU:          %.1f s per 1000 pods, %.2f cores on average over the elected run (target <= %.1f)\n",
		r.ManagerCPUSecondsPer1000, r.ManagerAvgCores, r.TargetManagerCores)
	for _, c := range []struct {
		phase string
		APICalls
	}{{"creating", r.CreateCalls}, {"deleting", r.DeleteCalls}} {
		fmt.Printf("manager, %s, per pod: %.2f API calls to the primary, %.2f to secondaries %v; %.1f proxy reconciles of %.0f ms, %.0f ms in the queue\n",
			c.phase, c.Primary, c.Secondaries, c.ByMethod, c.ProxyReconciles, c.ProxyReconcileMillis, c.ProxyQueueMillis)
		fmt.Printf("primary API server, %s, per pod, from every client: %v; a pod CREATE took %.0f ms, a webhook call %.0f ms (%.0f ms in the manager's handler)\n",
			c.phase, c.PrimaryServed, c.PodCreateMillis, c.WebhookMillis, c.WebhookHandlerMillis)
	}
	fmt.Printf("standby replica:      %.1f MiB ready, %.1f MiB after %d delegate events (peak %.1f)\n",
		r.StandbyStartMiB, r.StandbyEndMiB, r.DelegateEvents, r.StandbyPeakMiB)
	fmt.Printf("delegates per cluster: %v\n", r.DelegatesPerCluster)
	fmt.Printf("bed:                  %d secondaries, %.0f MiB resident before the runs\n", r.Clusters, r.BedMiB)
	for _, p := range r.Phases {
		fmt.Println("elected:", p)
	}
	printTargets(r.WorkTargets)
	printTracing(r.Tracing)
	printSteady(r.Steady)
	if m := r.MCS; m != nil {
		fmt.Printf("multi-cluster services: %d endpoints exported from %d clusters in every import %.2f s after written (target <= %.0f s); one endpoint change in every other import p50 %.0f ms, p90 %.0f ms over %d (target p50 <= %.0f ms)\n",
			m.Endpoints, m.Clusters, m.AllImportedSeconds, m.TargetAllImportedSeconds, m.ChangeP50Millis, m.ChangeP90Millis, m.Changes, m.TargetChangeP50Millis)
	}
}

func waitNodesReady(ctx context.Context, bed *testbed.Bed) error {
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, c := range bed.Secondaries {
			n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, flotillav1.VirtualNodeName(c.Name), metav1.GetOptions{})
			if err != nil || !testbed.NodeReady(n) {
				return false, nil
			}
			if n.Status.Allocatable.Pods().IsZero() {
				return false, nil
			}
		}
		return true, nil
	})
}

func installCRDs(ctx context.Context, c *testbed.Cluster) error {
	return installCRDsFrom(ctx, c, "crd/bases/*.yaml")
}

// installCRDsFrom installs the CRDs of config.CRDs that match glob in a cluster, and waits until
// each is established.
func installCRDsFrom(ctx context.Context, c *testbed.Cluster, glob string) error {
	cs, err := apiextensionsclient.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	files, err := fs.Glob(config.CRDs, glob)
	if err != nil {
		return err
	}
	for _, f := range files {
		raw, err := config.CRDs.ReadFile(f)
		if err != nil {
			return err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			return err
		}
		if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s: %w", crd.Name, err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // not visible yet
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// benchManager is a manager process and where its metrics are served (plain HTTP on loopback).
type benchManager struct {
	*testbed.Process
	bin, metricsURL, pprofURL, readyURL string
}

// diedWith adds to err, when the manager has exited, that it did and the end of its log.
func (m *benchManager) diedWith(err error) error {
	if !m.Exited() {
		return err
	}
	raw, _ := os.ReadFile(m.LogPath)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	return fmt.Errorf("%w; the manager exited, the end of its log:\n%s", err, strings.Join(lines[max(0, len(lines)-20):], "\n"))
}

// heapProfilePath is where the leader's heap profile goes: beside the report, else in the bench's
// work dir.
func heapProfilePath(dir, out string) string {
	if out == "" {
		return filepath.Join(dir, "heap.pprof")
	}
	return strings.TrimSuffix(out, filepath.Ext(out)) + "-heap.pprof"
}

// gcHeap makes the manager collect its garbage and returns its heap profile (pprof's gc=1): its
// heap gauge then says what is live.
func (m *benchManager) gcHeap(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.pprofURL+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the manager's heap profile: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the manager's heap profile: %w", err)
	}
	return raw, nil
}

// heapProfile saves the manager's heap profile (after a GC) to path and prints its largest
// holders of live memory, by the function that allocated it.
func (m *benchManager) heapProfile(ctx context.Context, path string) error {
	raw, err := m.gcHeap(ctx)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=20", "-sample_index=inuse_space", m.bin, path)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	fmt.Println("bench: the leader's live heap with every elected pod Running (saved to " + path + "):")
	return cmd.Run()
}

// benchKubeletPorts is how many kubelet ports a bench manager is given.
const benchKubeletPorts = 16

// startManager starts a manager on free ports; webhookURL is the URL it writes in the webhook
// configuration ("": its own).
func startManager(bin, kubeconfig, dir, webhookURL string, o options) (*benchManager, string, error) {
	ports := make([]int, 4)
	for i := range ports {
		p, err := testbed.FreePort()
		if err != nil {
			return nil, "", err
		}
		ports[i] = p
	}
	// One kubelet port per virtual node (BENCH_CLUSTERS of them), and room.
	kubeletPort, err := testbed.FreePortRange(benchKubeletPorts)
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", err
	}
	if webhookURL == "" {
		webhookURL = fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	}
	p, err := testbed.StartProcess("flotilla-manager", bin, append([]string{"--kubeconfig", kubeconfig,
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", ports[0]),
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", ports[1]), "--metrics-secure=false",
		"--webhook-port", strconv.Itoa(ports[2]), "--webhook-bind-host", "127.0.0.1", "--webhook-url", webhookURL,
		"--webhook-cert-dir", filepath.Join(dir, "webhook-certs"), "--kubelet-port", strconv.Itoa(kubeletPort),
		"--kubelet-port-count", strconv.Itoa(benchKubeletPorts),
		"--pprof-bind-address", fmt.Sprintf("127.0.0.1:%d", ports[3]), "--container-memory-limit", o.memoryLimit,
		"--leader-elect-renew-deadline", o.renewDeadline.String(), "--leader-elect-lease-duration", (o.renewDeadline * 3 / 2).String(),
		"--tracing-endpoint", o.tracingEndpoint, "--quiet-start", quietStart.String()}, o.managerArgs...), filepath.Join(dir, "manager.log"))
	if err != nil {
		return nil, "", err
	}
	return &benchManager{Process: p, bin: bin, metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[1]),
		readyURL: fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[0]),
		pprofURL: fmt.Sprintf("http://127.0.0.1:%d", ports[3])}, webhookURL, nil
}

// callMeter takes snapshots of the manager's requests by API server (client-go's
// rest_client_requests_total, host label) at each mark; phase i is between marks i and i+1.
type callMeter struct {
	url, primaryHost string
	primary          kubernetes.Interface
	pods             int
	marks, served    []map[string]float64
	err              error
}

func (m *callMeter) mark() {
	if m.err != nil {
		return
	}
	byHost, err := requestsByHost(m.url)
	if err != nil {
		m.err = fmt.Errorf("reading the manager's client metrics: %w", err)
		return
	}
	served, err := servedByResource(m.primary)
	if err != nil {
		m.err = fmt.Errorf("reading the primary API server's metrics: %w", err)
		return
	}
	m.marks, m.served = append(m.marks, byHost), append(m.served, served)
}

// servedByResource sums an API server's apiserver_request_total by "resource[/subresource] VERB",
// for the resources an elected pod costs: pods, Events, nodes.
func servedByResource(cs kubernetes.Interface) (map[string]float64, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range families["apiserver_request_duration_seconds"].GetMetric() {
		l := labelsOf(m)
		if l["resource"] == "pods" && l["subresource"] == "" && l["verb"] == "POST" {
			out[podCreateCount] += float64(m.GetHistogram().GetSampleCount())
			out[podCreateSum] += m.GetHistogram().GetSampleSum()
		}
	}
	for _, m := range families["apiserver_admission_webhook_admission_duration_seconds"].GetMetric() {
		out[webhookCount] += float64(m.GetHistogram().GetSampleCount())
		out[webhookSum] += m.GetHistogram().GetSampleSum()
	}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		l := labelsOf(m)
		switch l["resource"] {
		case "pods", "events", "nodes":
		default:
			continue
		}
		what := l["resource"]
		if l["subresource"] != "" {
			what += "/" + l["subresource"]
		}
		out[what+" "+l["verb"]] += m.GetCounter().GetValue()
	}
	return out, nil
}

// phase is the calls between marks i and i+1 per pod, to the primary and to all secondaries.
func (m *callMeter) phase(i int) APICalls {
	if i+1 >= len(m.marks) {
		return APICalls{}
	}
	perPod := func(f float64) float64 { return round(f / float64(m.pods)) }
	out := APICalls{ByMethod: map[string]float64{}, ByResource: map[string]float64{}}
	for key, after := range m.marks[i+1] {
		if what, ok := strings.CutPrefix(key, apiCallPrefix); ok {
			if v := perPod(after - m.marks[i][key]); v > 0 {
				out.ByResource[what] = v
			}
			continue
		}
		host, method, ok := strings.Cut(key, " ")
		if !ok {
			continue // a histogram's key
		}
		d := after - m.marks[i][key]
		where := "secondaries"
		if host == m.primaryHost {
			where = "primary"
			out.Primary += d
		} else {
			out.Secondaries += d
		}
		out.ByMethod[where+" "+method] += d
	}
	for k, v := range out.ByMethod {
		if out.ByMethod[k] = perPod(v); out.ByMethod[k] == 0 {
			delete(out.ByMethod, k)
		}
	}
	out.Primary, out.Secondaries = perPod(out.Primary), perPod(out.Secondaries)
	delta := func(key string) float64 { return m.marks[i+1][key] - m.marks[i][key] }
	if n := delta(proxyReconcileCount); n > 0 {
		out.ProxyReconciles = perPod(n)
		out.ProxyReconcileMillis = round(delta(proxyReconcileSum) * 1000 / n)
	}
	if n := delta(proxyQueueCount); n > 0 {
		out.ProxyQueueMillis = round(delta(proxyQueueSum) * 1000 / n)
	}
	out.PrimaryServed = map[string]float64{}
	for key, after := range m.served[i+1] {
		if !strings.Contains(key, " ") {
			continue // a histogram's key
		}
		if v := perPod(after - m.served[i][key]); v > 0 && !strings.HasSuffix(key, " WATCH") {
			out.PrimaryServed[key] = v
		}
	}
	if n := delta(handlerCount); n > 0 {
		out.WebhookHandlerMillis = round(delta(handlerSum) * 1000 / n)
	}
	served := func(key string) float64 { return m.served[i+1][key] - m.served[i][key] }
	if n := served(podCreateCount); n > 0 {
		out.PodCreateMillis = round(served(podCreateSum) * 1000 / n)
	}
	if n := served(webhookCount); n > 0 {
		out.WebhookMillis = round(served(webhookSum) * 1000 / n)
	}
	return out
}

// Keys of the proxy controller's histograms in a mark (not "host method" keys: no space).
const (
	// apiCallPrefix starts the keys of flotilla_api_requests_total: "api:primary patch pods/status".
	apiCallPrefix       = "api:"
	proxyReconcileCount = "proxy_reconcile_count"
	proxyReconcileSum   = "proxy_reconcile_sum"
	proxyQueueCount     = "proxy_queue_count"
	proxyQueueSum       = "proxy_queue_sum"
	handlerCount        = "webhook_handler_count"
	handlerSum          = "webhook_handler_sum"
	podCreateCount      = "pod_create_count"
	podCreateSum        = "pod_create_sum"
	webhookCount        = "webhook_count"
	webhookSum          = "webhook_sum"
)

// labelsOf is a metric's labels by name.
func labelsOf(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, lp := range m.GetLabel() {
		l[lp.GetName()] = lp.GetValue()
	}
	return l
}

// requestsByHost sums rest_client_requests_total by "host method".
func requestsByHost(url string) (map[string]float64, error) {
	families, err := scrape(url)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range families["rest_client_requests_total"].GetMetric() {
		var host, method string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "host":
				host = l.GetValue()
			case "method":
				method = l.GetValue()
			}
		}
		out[host+" "+method] += m.GetCounter().GetValue()
	}
	for _, m := range families["flotilla_api_requests_total"].GetMetric() {
		l := labelsOf(m)
		if l["verb"] == "watch" || l["verb"] == "list" && l["resource"] != "events" {
			continue // informers' (an Event list is a look at a delegate's Events)
		}
		out[apiCallPrefix+l["api_server"]+" "+l["verb"]+" "+l["resource"]] += m.GetCounter().GetValue()
	}
	histogram := func(family, label, value, count, sum string) {
		for _, m := range families[family].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					out[count] += float64(m.GetHistogram().GetSampleCount())
					out[sum] += m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	histogram("controller_runtime_reconcile_time_seconds", "controller", "proxy", proxyReconcileCount, proxyReconcileSum)
	histogram("workqueue_queue_duration_seconds", "name", "proxy", proxyQueueCount, proxyQueueSum)
	histogram("controller_runtime_webhook_latency_seconds", "webhook", webhook.Path, handlerCount, handlerSum)
	return out, nil
}

// hostOf is the host:port of a REST config's Host, as client-go's metrics label it.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return raw
	}
	return u.Host
}

// procCPUSeconds is a process's user and system CPU time so far.
func procCPUSeconds(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces) start at state, field 3; utime and stime
	// are fields 14 and 15, in clock ticks (USER_HZ, 100 on Linux).
	rest := string(raw)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

// scrape reads a Prometheus text endpoint.
func scrape(url string) (map[string]*dto.MetricFamily, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// heapInUseMiB is the manager's Go heap in use (spans holding objects) now, from its metrics.
func heapInUseMiB(url string) (float64, error) {
	families, err := scrape(url)
	if err != nil {
		return 0, err
	}
	for _, m := range families["go_memstats_heap_inuse_bytes"].GetMetric() {
		return round(m.GetGauge().GetValue() / (1 << 20)), nil
	}
	return 0, errors.New("no go_memstats_heap_inuse_bytes in the manager's metrics")
}
