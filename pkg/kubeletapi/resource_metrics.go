package kubeletapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/logging"
)

// nodeUsage reads a virtual node's secondary and folds it into the meter.
func (k *Server) nodeUsage(r *http.Request, node string) nodeReport {
	cluster, _ := flotillav1.ClusterOfNode(node)
	var samples []podUsage
	var err error
	if sec, ok := k.Secondaries.Secondary(cluster); !ok {
		err = fmt.Errorf("secondary %s is not usable", cluster)
	} else {
		samples, err = k.usage.read(r.Context(), sec, k.Secondaries.PrimaryID())
	}
	return k.usage.observe(node, samples, err, k.now(), k.Log)
}

// serveUsage answers a virtual node's resource metrics or Summary.
func (k *Server) serveUsage(w http.ResponseWriter, r *http.Request, node string, ep endpoint) {
	report := k.nodeUsage(r, node)
	if ep == endpointResourceMetrics {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		writeResourceMetrics(w, report)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(summaryOf(report)); err != nil {
		k.Log.V(logging.Debug).Info("Writing a Summary failed", "node", node, "err", err)
	}
}

// writeResourceMetrics writes a report in the text format of the kubelet's /metrics/resource,
// with the metrics metrics-server reads. A node without pods reports no node usage lines: its
// usage would be zero, which metrics-server discards anyway.
func writeResourceMetrics(w io.Writer, r nodeReport) {
	ms := func(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
	num := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	header := func(name, kind, help string) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
	}
	scrapeErr := "0"
	if r.Err != "" {
		scrapeErr = "1"
	}
	header("scrape_error", "gauge", "1 if there was an error while getting container metrics, 0 otherwise")
	fmt.Fprintf(w, "scrape_error %s\n", scrapeErr)
	if len(r.Pods) == 0 {
		return
	}
	header("node_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the node's pods in core-seconds")
	fmt.Fprintf(w, "node_cpu_usage_seconds_total %s %s\n", num(r.CPUSeconds), ms(r.At))
	header("node_memory_working_set_bytes", "gauge", "Current working set of the node's pods in bytes")
	fmt.Fprintf(w, "node_memory_working_set_bytes %s %s\n", num(r.MemoryBytes), ms(r.At))
	containerLines := func(name, kind, help string, value func(containerReport) float64) {
		header(name, kind, help)
		for _, p := range r.Pods {
			for _, c := range p.Containers {
				fmt.Fprintf(w, "%s{container=%s,namespace=%s,pod=%s} %s %s\n", name,
					strconv.Quote(c.Name), strconv.Quote(p.Namespace), strconv.Quote(p.Name), num(value(c)), ms(p.At))
			}
		}
	}
	containerLines("container_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the container in core-seconds",
		func(c containerReport) float64 { return c.CPUSeconds })
	containerLines("container_memory_working_set_bytes", "gauge", "Current working set of the container in bytes",
		func(c containerReport) float64 { return c.MemoryBytes })
	// The pod series a kubelet serves beside them (tools that read pods, not containers), each
	// the sum of the pod's containers, as the kubelet's pod cgroup sums them.
	podLines := func(name, kind, help string, value func(containerReport) float64) {
		header(name, kind, help)
		for _, p := range r.Pods {
			var sum float64
			for _, c := range p.Containers {
				sum += value(c)
			}
			fmt.Fprintf(w, "%s{namespace=%s,pod=%s} %s %s\n", name, strconv.Quote(p.Namespace), strconv.Quote(p.Name), num(sum), ms(p.At))
		}
	}
	podLines("pod_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the pod in core-seconds",
		func(c containerReport) float64 { return c.CPUSeconds })
	podLines("pod_memory_working_set_bytes", "gauge", "Current working set of the pod in bytes",
		func(c containerReport) float64 { return c.MemoryBytes })
}

// summaryOf is a report as the kubelet's Summary API: CPU and memory of the node and of each pod
// and container (what the secondary's metrics API knows; the rest of a Summary stays empty).
func summaryOf(r nodeReport) *statsv1alpha1.Summary {
	cpu := func(cores, seconds float64, at time.Time) *statsv1alpha1.CPUStats {
		nanoCores, nanoSeconds := uint64(cores*1e9), uint64(seconds*1e9)
		return &statsv1alpha1.CPUStats{Time: metav1.NewTime(at), UsageNanoCores: &nanoCores, UsageCoreNanoSeconds: &nanoSeconds}
	}
	memory := func(bytes float64, at time.Time) *statsv1alpha1.MemoryStats {
		b := uint64(bytes)
		return &statsv1alpha1.MemoryStats{Time: metav1.NewTime(at), WorkingSetBytes: &b}
	}
	s := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: r.Node,
		CPU: cpu(r.Cores, r.CPUSeconds, r.At), Memory: memory(r.MemoryBytes, r.At)}}
	for _, p := range r.Pods {
		ps := statsv1alpha1.PodStats{PodRef: statsv1alpha1.PodReference{Name: p.Name, Namespace: p.Namespace, UID: p.ProxyUID}}
		var cores, seconds, bytes float64
		for _, c := range p.Containers {
			ps.Containers = append(ps.Containers, statsv1alpha1.ContainerStats{Name: c.Name,
				CPU: cpu(c.Cores, c.CPUSeconds, p.At), Memory: memory(c.MemoryBytes, p.At)})
			cores, seconds, bytes = cores+c.Cores, seconds+c.CPUSeconds, bytes+c.MemoryBytes
		}
		ps.CPU, ps.Memory = cpu(cores, seconds, p.At), memory(bytes, p.At)
		s.Pods = append(s.Pods, ps)
	}
	return s
}
