package kubeletapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestCPUCounterIntegratesTheRateItIsGiven(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		start cpuCounter
		cores float64
		at    time.Time
		want  cpuCounter
	}{
		{"first sample: one window's worth", cpuCounter{}, 0.5, t0, cpuCounter{seconds: 7.5, at: t0}},
		{"newer sample: the rate over the time since", cpuCounter{seconds: 10, at: t0}, 0.25, t0.Add(20 * time.Second), cpuCounter{seconds: 15, at: t0.Add(20 * time.Second)}},
		{"same sample again: unchanged", cpuCounter{seconds: 10, at: t0}, 4, t0, cpuCounter{seconds: 10, at: t0}},
		{"older sample: unchanged", cpuCounter{seconds: 10, at: t0}, 4, t0.Add(-time.Second), cpuCounter{seconds: 10, at: t0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.start.advance(tc.cores, tc.at, 15*time.Second)
			if math.Abs(got.seconds-tc.want.seconds) > 1e-9 || !got.at.Equal(tc.want.at) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A reader that takes the rate of the counters between two scrapes (as metrics-server does) gets
// back the usage the secondary reported.
func TestObserveGivesBackTheSecondarysRate(t *testing.T) {
	m := newUsageMeter()
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	sample := func(at time.Time, cores float64) []podUsage {
		return []podUsage{{Namespace: "ns", Name: "web", ProxyUID: "uid-1", At: at, Window: 15 * time.Second,
			Containers: []containerUsage{{Name: "app", Cores: cores, MemoryBytes: 64 << 20}}}}
	}
	first := m.observe("flotilla-a", sample(t0, 0.2), nil, t0.Add(time.Second), logr.Discard())
	second := m.observe("flotilla-a", sample(t0.Add(30*time.Second), 0.2), nil, t0.Add(31*time.Second), logr.Discard())
	c1, c2 := first.Pods[0].Containers[0], second.Pods[0].Containers[0]
	if rate := (c2.CPUSeconds - c1.CPUSeconds) / 30; math.Abs(rate-0.2) > 1e-9 {
		t.Errorf("container rate %v, want 0.2", rate)
	}
	if rate := (second.CPUSeconds - first.CPUSeconds) / 30; math.Abs(rate-0.2) > 1e-9 {
		t.Errorf("node rate %v, want 0.2", rate)
	}
	if second.MemoryBytes != 64<<20 || second.Cores != 0.2 {
		t.Errorf("node memory %v cores %v", second.MemoryBytes, second.Cores)
	}
	// The delegate gone: its counter goes with it, and a new one of the same name starts afresh.
	m.observe("flotilla-a", nil, nil, t0.Add(40*time.Second), logr.Discard())
	again := m.observe("flotilla-a", sample(t0.Add(60*time.Second), 0.2), nil, t0.Add(61*time.Second), logr.Discard())
	if got := again.Pods[0].Containers[0].CPUSeconds; math.Abs(got-3) > 1e-9 {
		t.Errorf("a new delegate's counter starts at %v, want one window's worth (3)", got)
	}
	// Another virtual node's counters are its own.
	other := m.observe("flotilla-b", sample(t0.Add(60*time.Second), 1), nil, t0.Add(61*time.Second), logr.Discard())
	if got := other.Pods[0].Containers[0].CPUSeconds; math.Abs(got-15) > 1e-9 {
		t.Errorf("node b's counter %v, want 15", got)
	}
}

func TestObserveAFailedReadReportsTheErrorAndNoPods(t *testing.T) {
	m := newUsageMeter()
	r := m.observe("flotilla-a", nil, errors.New("secondary a serves no metrics API"), time.Now(), logr.Discard())
	if r.Err == "" || len(r.Pods) != 0 {
		t.Fatalf("report %+v", r)
	}
	var out bytes.Buffer
	writeResourceMetrics(&out, r)
	if !strings.Contains(out.String(), "scrape_error 1\n") || strings.Contains(out.String(), "node_cpu") {
		t.Errorf("metrics of a failed read:\n%s", out.String())
	}
}

// The text is what metrics-server reads: it must parse as the Prometheus text format, with the
// names, labels, values and millisecond timestamps of the kubelet's /metrics/resource.
func TestResourceMetricsParse(t *testing.T) {
	at := time.UnixMilli(1795000000123)
	r := nodeReport{Node: "flotilla-a", At: at.Add(time.Second), Cores: 0.3, CPUSeconds: 42.5, MemoryBytes: 3 << 20,
		Pods: []podReport{{Namespace: "ns", Name: "web", ProxyUID: "uid-1", At: at, Containers: []containerReport{
			{containerUsage: containerUsage{Name: "app", Cores: 0.1, MemoryBytes: 1 << 20}, CPUSeconds: 12.25},
			{containerUsage: containerUsage{Name: "side\"car", Cores: 0.2, MemoryBytes: 2 << 20}, CPUSeconds: 30.25},
		}}}}
	var out bytes.Buffer
	writeResourceMetrics(&out, r)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(&out)
	if err != nil {
		t.Fatalf("parsing:\n%s\n%v", out.String(), err)
	}
	want := map[string][]string{
		"scrape_error":                       {"0"},
		"node_cpu_usage_seconds_total":       {"42.5@1795000001123"},
		"node_memory_working_set_bytes":      {"3145728@1795000001123"},
		"container_cpu_usage_seconds_total":  {`app ns web 12.25@1795000000123`, `side"car ns web 30.25@1795000000123`},
		"container_memory_working_set_bytes": {`app ns web 1048576@1795000000123`, `side"car ns web 2097152@1795000000123`},
		"pod_cpu_usage_seconds_total":        {`ns web 42.5@1795000000123`},
		"pod_memory_working_set_bytes":       {`ns web 3145728@1795000000123`},
	}
	for name, values := range want {
		f, ok := families[name]
		if !ok {
			t.Errorf("no %s", name)
			continue
		}
		var got []string
		for _, m := range f.Metric {
			var v float64
			switch {
			case m.Counter != nil:
				v = m.Counter.GetValue()
			case m.Gauge != nil:
				v = m.Gauge.GetValue()
			}
			s := strings.TrimSpace(strings.Join(labelValues(m.Label), " ") + " " + model.SampleValue(v).String())
			if m.TimestampMs != nil {
				s += "@" + strconv.FormatInt(*m.TimestampMs, 10)
			}
			got = append(got, s)
		}
		if strings.Join(got, "|") != strings.Join(values, "|") {
			t.Errorf("%s: got %q, want %q", name, got, values)
		}
	}
}

func TestSummaryCarriesTheProxysReferenceAndUsage(t *testing.T) {
	at := time.Unix(1795000000, 0)
	r := nodeReport{Node: "flotilla-a", At: at, Cores: 0.3, CPUSeconds: 4, MemoryBytes: 3 << 20,
		Pods: []podReport{{Namespace: "ns", Name: "web", ProxyUID: "uid-1", At: at, Containers: []containerReport{
			{containerUsage: containerUsage{Name: "app", Cores: 0.1, MemoryBytes: 1 << 20}, CPUSeconds: 1},
			{containerUsage: containerUsage{Name: "side", Cores: 0.2, MemoryBytes: 2 << 20}, CPUSeconds: 3},
		}}}}
	raw, err := json.Marshal(summaryOf(r))
	if err != nil {
		t.Fatal(err)
	}
	var s statsv1alpha1.Summary
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	if s.Node.NodeName != "flotilla-a" || *s.Node.CPU.UsageNanoCores != 300000000 || *s.Node.Memory.WorkingSetBytes != 3<<20 {
		t.Errorf("node %+v", s.Node)
	}
	if len(s.Pods) != 1 || s.Pods[0].PodRef.UID != "uid-1" || *s.Pods[0].CPU.UsageCoreNanoSeconds != 4e9 || len(s.Pods[0].Containers) != 2 {
		t.Errorf("pods %+v", s.Pods)
	}
}

func labelValues(labels []*dto.LabelPair) []string {
	out := make([]string, 0, len(labels))
	for _, l := range labels {
		out = append(out, l.GetValue())
	}
	return out
}
