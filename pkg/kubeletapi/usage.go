package kubeletapi

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/delegates"
)

// usageTimeout bounds one read of a secondary's metrics API: a scrape of one virtual node never
// waits on a black-holed secondary longer than this (metrics-server gives a kubelet 10 s).
const usageTimeout = 5 * time.Second

// cpuCounter is a cumulative CPU time, as a kubelet reports it. A metrics API reports a rate (cores
// averaged over a window); metrics-server and the Summary API's consumers want the counter, from
// which they compute the rate again. Integrating the rate gives a counter whose rate is the rate.
type cpuCounter struct {
	seconds float64
	at      time.Time
}

// advance adds the usage of cores from the counter's time until at. The first sample starts the
// counter at one window's worth; a sample no newer than the counter (the secondary's metrics-server
// has not scraped again) leaves it as it is, so the reader sees the same point again, not a new one.
func (c cpuCounter) advance(cores float64, at time.Time, window time.Duration) cpuCounter {
	switch {
	case c.at.IsZero():
		return cpuCounter{seconds: cores * window.Seconds(), at: at}
	case !at.After(c.at):
		return c
	default:
		return cpuCounter{seconds: c.seconds + cores*at.Sub(c.at).Seconds(), at: at}
	}
}

// containerUsage is one container of a delegate, as read from the secondary's metrics API.
type containerUsage struct {
	Name        string
	Cores       float64
	MemoryBytes float64
}

// podUsage is one delegate's usage sample, named as its proxy (same namespace and name).
type podUsage struct {
	Namespace, Name string
	ProxyUID        string
	At              time.Time
	Window          time.Duration
	Containers      []containerUsage
}

// containerReport and podReport are what a virtual node's endpoints serve for one container and
// one proxy: the sample with its CPU counter.
type containerReport struct {
	containerUsage
	CPUSeconds float64
}

type podReport struct {
	Namespace, Name, ProxyUID string
	At                        time.Time
	Containers                []containerReport
}

// nodeReport is the whole answer for one virtual node: its proxies' usage and the node's own, the
// sum of its proxies' (a virtual node's usage is that of the pods Flotilla runs there, not the
// secondary's).
type nodeReport struct {
	Node        string
	At          time.Time
	Pods        []podReport
	Cores       float64
	CPUSeconds  float64
	MemoryBytes float64
	// Err says why the secondary's usage could not be read ("" when it was): the endpoints still
	// answer, with scrape_error 1 and no pods, as a kubelet does when its own source fails.
	Err string
}

// usageMeter turns the secondaries' metrics APIs into kubelet resource metrics: it keeps the CPU
// counters between scrapes (per proxy container and per virtual node) and a metrics client per
// secondary.
type usageMeter struct {
	mu      sync.Mutex
	clients map[string]meteredClient
	pods    map[string]map[string]cpuCounter // node -> namespace/name/container -> counter
	nodes   map[string]cpuCounter
	lastErr map[string]string // node -> the last error logged, so each change is logged once
}

type meteredClient struct {
	config *rest.Config
	client metricsclient.Interface
}

func newUsageMeter() *usageMeter {
	return &usageMeter{clients: map[string]meteredClient{}, pods: map[string]map[string]cpuCounter{},
		nodes: map[string]cpuCounter{}, lastErr: map[string]string{}}
}

// client returns the metrics client of a secondary, made again when its registration changed.
func (m *usageMeter) client(sec clusters.Secondary) (metricsclient.Interface, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.clients[sec.Name]; ok && c.config == sec.Config {
		return c.client, nil
	}
	cfg := rest.CopyConfig(sec.Config)
	cfg.Timeout = usageTimeout
	c, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the metrics client of %s: %w", sec.Name, err)
	}
	m.clients[sec.Name] = meteredClient{config: sec.Config, client: c}
	return c, nil
}

// read lists this primary's delegates' usage in a secondary (one call, label-selected). Only
// delegates of this primary are read: the grant allows no more than list of pods' metrics, and
// the selector keeps the answer to Flotilla's own pods.
func (m *usageMeter) read(ctx context.Context, sec clusters.Secondary, primaryID string) ([]podUsage, error) {
	if !sec.Running {
		return nil, fmt.Errorf("secondary %s does not answer its health probes", sec.Name)
	}
	c, err := m.client(sec)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, usageTimeout)
	defer cancel()
	list, err := c.MetricsV1beta1().PodMetricses(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		LabelSelector: flotillav1.LabelPrimary + "=" + primaryID})
	if err != nil {
		return nil, usageError(sec.Name, err)
	}
	out := make([]podUsage, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, usageOf(&list.Items[i], sec))
	}
	return out, nil
}

// usageError says what a failed read means for the user.
func usageError(cluster string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("secondary %s serves no metrics API (metrics.k8s.io): install metrics-server there for kubectl top and HPAs on its pods: %w", cluster, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("this primary may not read metrics.k8s.io in secondary %s: run `flotillactl cluster join` again to grant it: %w", cluster, err)
	default:
		return fmt.Errorf("reading the metrics API of secondary %s: %w", cluster, err)
	}
}

// usageOf is a delegate's PodMetrics as the proxy's usage; the proxy's UID comes from the
// delegate in the cache when it is there (the Summary API's pod reference carries it).
func usageOf(pm *metricsv1beta1.PodMetrics, sec clusters.Secondary) podUsage {
	u := podUsage{Namespace: pm.Namespace, Name: pm.Name, At: pm.Timestamp.Time, Window: pm.Window.Duration}
	if d, _, err := delegates.Get(sec, pm.Namespace, pm.Name); err == nil && d != nil {
		u.ProxyUID = d.Annotations[flotillav1.AnnotationProxyUID]
	}
	for _, c := range pm.Containers {
		u.Containers = append(u.Containers, containerUsage{Name: c.Name,
			Cores: c.Usage.Cpu().AsApproximateFloat64(), MemoryBytes: c.Usage.Memory().AsApproximateFloat64()})
	}
	return u
}

// observe folds one read of a virtual node's secondary into its counters and returns the report.
// Counters of proxies no longer reported are dropped. readErr is the read's failure, if any: the
// node's counters then stay as they were.
func (m *usageMeter) observe(node string, samples []podUsage, readErr error, now time.Time, log logr.Logger) nodeReport {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := nodeReport{Node: node, At: now}
	errText := ""
	if readErr != nil {
		errText = readErr.Error()
	}
	if errText != m.lastErr[node] {
		if errText != "" {
			log.Info("Resource metrics of the virtual node's pods unavailable", "node", node, "reason", errText)
		} else {
			log.Info("Resource metrics of the virtual node's pods available again", "node", node)
		}
		m.lastErr[node] = errText
	}
	if readErr != nil {
		r.Err = errText
		return r
	}
	prev := m.pods[node]
	next := make(map[string]cpuCounter, len(samples))
	sort.Slice(samples, func(i, j int) bool {
		if samples[i].Namespace != samples[j].Namespace {
			return samples[i].Namespace < samples[j].Namespace
		}
		return samples[i].Name < samples[j].Name
	})
	for _, s := range samples {
		pr := podReport{Namespace: s.Namespace, Name: s.Name, ProxyUID: s.ProxyUID, At: s.At}
		for _, c := range s.Containers {
			key := s.Namespace + "/" + s.Name + "/" + c.Name
			counter := prev[key].advance(c.Cores, s.At, s.Window)
			next[key] = counter
			pr.Containers = append(pr.Containers, containerReport{containerUsage: c, CPUSeconds: counter.seconds})
			r.Cores += c.Cores
			r.MemoryBytes += c.MemoryBytes
		}
		r.Pods = append(r.Pods, pr)
	}
	m.pods[node] = next
	nc := m.nodes[node].advance(r.Cores, now, 0)
	m.nodes[node] = nc
	r.CPUSeconds = nc.seconds
	return r
}
