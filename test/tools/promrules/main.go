// Command promrules evaluates Prometheus alerting rules over given series as Prometheus's own rule
// manager does (the loop of promtool's `test rules`, cmd/promtool/unittest.go), and says which
// alerts fire: the chart's PrometheusRule is tested without a Prometheus. It is built from the
// module proxy into the tools cache by test/tools/install.sh (set promrules), as its own module so
// that Prometheus's dependencies stay out of Flotilla's go.mod.
//
// Usage:
//
//	promrules eval -rules FILE (-series FILE | -scrape FILE) [-at 10m] [-interval 1m] [-eval-interval 15s]
//	promrules test -rules FILE CASES.yaml
//	promrules names [-dashboard FILE]... [-rules FILE]...
//
// The rules FILE is a rule file (groups:), a PrometheusRule, or a YAML stream that holds one (helm
// template's output): its spec is a rule file. eval loads the series in promtool's `load` syntax
// (-series: one series a line, `name{labels} values`), or one scrape of a /metrics endpoint in the
// text exposition format replayed as constant series (-scrape), evaluates the rules every
// -eval-interval from 0 to -at, and prints, as JSON, the alerts active at -at. test runs cases:
//
//	cases:
//	  - name: a secondary that does not answer
//	    interval: 1m
//	    series:
//	      - 'flotilla_cluster_ready{member_cluster="east",role="secondary"} 0x10'
//	    at: 10m
//	    firing: [FlotillaClusterUnreachable]
//
// A case passes when the alerts firing at `at` are exactly `firing` (by name; none when empty). It
// prints one line per case and "N passed, N failed", and exits 1 when one failed.
//
// names parses every query of Grafana dashboards (each panel's targets, rows' panels included; the
// dashboard's variables replaced: $__rate_interval and the like by 5m, any other by .*) and of rule
// files (each rule's expr) with Prometheus's PromQL parser, and prints, as JSON, each query with
// the metric names it selects, and every name once.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"go.yaml.in/yaml/v3"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "eval":
		err = evalCmd(os.Args[2:], os.Stdout)
	case "names":
		err = namesCmd(os.Args[2:], os.Stdout)
	case "test":
		var failed bool
		failed, err = testCmd(os.Args[2:], os.Stdout)
		if err == nil && failed {
			os.Exit(1)
		}
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "promrules:", err)
		os.Exit(2)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: promrules eval -rules FILE (-series FILE | -scrape FILE) [-at 10m] [-interval 1m] [-eval-interval 15s]")
	fmt.Fprintln(os.Stderr, "       promrules test -rules FILE CASES.yaml")
	fmt.Fprintln(os.Stderr, "       promrules names [-dashboard FILE]... [-rules FILE]...")
	os.Exit(2)
}

// Alert is one alert active at the end of an evaluation.
type Alert struct {
	Name   string            `json:"alertname"`
	State  string            `json:"state"`
	Labels map[string]string `json:"labels"`
	// ActiveFor is how long its condition had held at the end.
	ActiveFor string `json:"activeFor"`
}

// Result is what eval prints.
type Result struct {
	Alerts []Alert `json:"alerts"`
}

func evalCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	rulesPath := fs.String("rules", "", "rule file, PrometheusRule, or YAML stream holding one")
	seriesPath := fs.String("series", "", "series in promtool's load syntax, one a line")
	var scrapePaths files
	fs.Var(&scrapePaths, "scrape", "a scrape in the text exposition format, replayed as constant series; repeated, the scrapes of a target taken every -scrape-every, in order")
	scrapeEvery := fs.Duration("scrape-every", 0, "time between two scrapes given with -scrape (the last is held to the end)")
	at := fs.Duration("at", 10*time.Minute, "evaluate from 0 to this time")
	interval := fs.Duration("interval", time.Minute, "time between two samples of a series")
	evalInterval := fs.Duration("eval-interval", 15*time.Second, "time between two evaluations of the rules")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rulesPath == "" || (*seriesPath == "") == (len(scrapePaths) == 0) {
		return errors.New("eval needs -rules and one of -series or -scrape")
	}
	ruleFile, cleanup, err := ruleFileOf(*rulesPath)
	if err != nil {
		return err
	}
	defer cleanup()
	var series []string
	if *seriesPath != "" {
		raw, err := os.ReadFile(*seriesPath)
		if err != nil {
			return fmt.Errorf("reading the series: %w", err)
		}
		for _, l := range strings.Split(string(raw), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				series = append(series, l)
			}
		}
	} else {
		if len(scrapePaths) > 1 && *scrapeEvery <= 0 {
			return errors.New("eval: more than one -scrape needs -scrape-every")
		}
		var readers []io.Reader
		for _, path := range scrapePaths {
			raw, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("reading the scrape: %w", err)
			}
			readers = append(readers, bytes.NewReader(raw))
		}
		series, err = scrapesSeries(readers, *scrapeEvery, *interval, int(*at / *interval))
		if err != nil {
			return err
		}
	}
	alerts, err := evaluate(ruleFile, series, *interval, *evalInterval, *at)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(Result{Alerts: alerts})
}

// Cases is the file test reads. Background series (a healthy manager, say) are loaded in every
// case but those that ask for none, so that a case states only what it is about.
type Cases struct {
	Background []string `yaml:"background"`
	Cases      []Case   `yaml:"cases"`
}

// Case is series, a time, and the alerts that must fire then.
type Case struct {
	Name         string         `yaml:"name"`
	NoBackground bool           `yaml:"no_background"`
	Interval     model.Duration `yaml:"interval"`
	EvalInterval model.Duration `yaml:"eval_interval"`
	Series       []string       `yaml:"series"`
	At           model.Duration `yaml:"at"`
	Firing       []string       `yaml:"firing"`
}

func testCmd(args []string, out io.Writer) (failed bool, err error) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	rulesPath := fs.String("rules", "", "rule file, PrometheusRule, or YAML stream holding one")
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	if *rulesPath == "" || fs.NArg() != 1 {
		return false, errors.New("test needs -rules and one file of cases")
	}
	ruleFile, cleanup, err := ruleFileOf(*rulesPath)
	if err != nil {
		return false, err
	}
	defer cleanup()
	raw, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return false, fmt.Errorf("reading the cases: %w", err)
	}
	var cs Cases
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&cs); err != nil {
		return false, fmt.Errorf("parsing the cases %s: %w", fs.Arg(0), err)
	}
	if len(cs.Cases) == 0 {
		return false, fmt.Errorf("%s has no cases", fs.Arg(0))
	}
	passed, failures := 0, 0
	for _, c := range cs.Cases {
		interval, evalInterval := time.Duration(c.Interval), time.Duration(c.EvalInterval)
		if interval == 0 {
			interval = time.Minute
		}
		if evalInterval == 0 {
			evalInterval = 15 * time.Second
		}
		series := c.Series
		if !c.NoBackground {
			series = append(slices.Clone(cs.Background), series...)
		}
		alerts, err := evaluate(ruleFile, series, interval, evalInterval, time.Duration(c.At))
		if err != nil {
			return false, fmt.Errorf("case %q: %w", c.Name, err)
		}
		got := firingNames(alerts)
		want := slices.Clone(c.Firing)
		sort.Strings(want)
		want = slices.Compact(want)
		if slices.Equal(got, want) {
			passed++
			fmt.Fprintf(out, "PASS %s: firing %v\n", c.Name, got)
			continue
		}
		failures++
		fmt.Fprintf(out, "FAIL %s: firing %v, want %v (active: %s)\n", c.Name, got, want, describe(alerts))
	}
	fmt.Fprintf(out, "%d passed, %d failed\n", passed, failures)
	return failures > 0, nil
}

func firingNames(alerts []Alert) []string {
	names := []string{}
	for _, a := range alerts {
		if a.State == rules.StateFiring.String() {
			names = append(names, a.Name)
		}
	}
	sort.Strings(names)
	return slices.Compact(names)
}

func describe(alerts []Alert) string {
	if len(alerts) == 0 {
		return "none"
	}
	var parts []string
	for _, a := range alerts {
		parts = append(parts, fmt.Sprintf("%s %s for %s %v", a.Name, a.State, a.ActiveFor, a.Labels))
	}
	return strings.Join(parts, "; ")
}

// evaluate loads the series (one sample every interval), evaluates every group of the rule file
// every evalInterval from 0 to at, as promtool's test rules does, and returns the alerts active at
// the end.
func evaluate(ruleFile string, series []string, interval, evalInterval, at time.Duration) ([]Alert, error) {
	if interval <= 0 || evalInterval <= 0 || at < 0 {
		return nil, fmt.Errorf("interval %s, eval interval %s, at %s: want positive intervals", interval, evalInterval, at)
	}
	var load strings.Builder
	fmt.Fprintf(&load, "load %s\n", promDuration(interval))
	for _, s := range series {
		fmt.Fprintf(&load, "  %s\n", s)
	}
	ll, err := promqltest.NewLazyLoader(load.String(), promqltest.LazyLoaderOpts{EnableAtModifier: true, EnableNegativeOffset: true})
	if err != nil {
		return nil, fmt.Errorf("loading the series: %w", err)
	}
	defer ll.Close()
	ll.SubqueryInterval = evalInterval
	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:  rules.EngineQueryFunc(ll.QueryEngine(), ll.Storage()),
		Appendable: ll.Storage(),
		Context:    ll.Context(),
		NotifyFunc: func(context.Context, string, ...*rules.Alert) {},
		Logger:     promslog.NewNopLogger(),
		Parser:     parser.NewParser(parser.Options{}),
	})
	groups, errs := m.LoadGroups(evalInterval, labels.EmptyLabels(), "", nil, false, ruleFile)
	if len(errs) > 0 {
		return nil, fmt.Errorf("loading the rules: %w", errors.Join(errs...))
	}
	var alerting []*rules.AlertingRule
	for _, g := range groups {
		for _, r := range g.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				// As promtool does: the ALERTS series is written from the first evaluation.
				ar.SetRestored(true)
				alerting = append(alerting, ar)
			}
		}
	}
	if len(alerting) == 0 {
		return nil, fmt.Errorf("%s has no alerting rule", ruleFile)
	}
	start := time.Unix(0, 0).UTC()
	end := start.Add(at)
	var evalErr error
	for ts := start; !ts.After(end) && evalErr == nil; ts = ts.Add(evalInterval) {
		ll.WithSamplesTill(ts, func(err error) {
			if err != nil {
				evalErr = fmt.Errorf("appending the samples up to %s: %w", ts.Sub(start), err)
				return
			}
			for _, g := range groups {
				g.Eval(ll.Context(), ts)
				for _, r := range g.Rules() {
					if r.LastError() != nil {
						evalErr = fmt.Errorf("rule %s at %s: %w", r.Name(), ts.Sub(start), r.LastError())
					}
				}
			}
		})
	}
	if evalErr != nil {
		return nil, evalErr
	}
	var out []Alert
	for _, ar := range alerting {
		for _, a := range ar.ActiveAlerts() {
			out = append(out, Alert{Name: ar.Name(), State: a.State.String(), Labels: a.Labels.Map(),
				ActiveFor: model.Duration(end.Sub(a.ActiveAt)).String()})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return labels.FromMap(out[i].Labels).String() < labels.FromMap(out[j].Labels).String()
	})
	return out, nil
}

func promDuration(d time.Duration) string { return model.Duration(d).String() }

// ruleFileOf finds the rule file in path (a rule file, a PrometheusRule or a YAML stream holding
// one), checks it as Prometheus does (rulefmt) and writes it where the rule manager reads it.
func ruleFileOf(path string) (string, func(), error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("reading the rules: %w", err)
	}
	spec, err := ruleSpec(raw)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", path, err)
	}
	content, err := yaml.Marshal(spec)
	if err != nil {
		return "", nil, fmt.Errorf("writing the rule file: %w", err)
	}
	if _, errs := rulefmt.Parse(content, false, model.UTF8Validation, parser.NewParser(parser.Options{})); len(errs) > 0 {
		return "", nil, fmt.Errorf("the rules of %s: %w", path, errors.Join(errs...))
	}
	dir, err := os.MkdirTemp("", "promrules-")
	if err != nil {
		return "", nil, fmt.Errorf("making a folder for the rule file: %w", err)
	}
	file := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(file, content, 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("writing the rule file: %w", err)
	}
	return file, func() { _ = os.RemoveAll(dir) }, nil
}

// ruleSpec is the first document of raw that is a rule file (groups at its top) or a
// PrometheusRule (its spec).
func ruleSpec(raw []byte) (map[string]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil, errors.New("no rule file and no PrometheusRule in it")
		}
		if err != nil {
			return nil, fmt.Errorf("parsing YAML: %w", err)
		}
		if _, ok := doc["groups"]; ok {
			return doc, nil
		}
		if doc["kind"] == "PrometheusRule" {
			spec, ok := doc["spec"].(map[string]any)
			if !ok {
				return nil, errors.New("a PrometheusRule without a spec")
			}
			return spec, nil
		}
	}
}

// scrapeSamples reads one scrape (text exposition format) as samples: each series (in the load
// syntax's notation) and its value, in a stable order.
func scrapeSamples(r io.Reader) ([]string, map[string]float64, error) {
	tp := expfmt.NewTextParser(model.UTF8Validation)
	families, err := tp.TextToMetricFamilies(r)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing the scrape: %w", err)
	}
	var order []string
	values := map[string]float64{}
	add := func(name string, lbls map[string]string, v float64) {
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return
		}
		m := map[string]string{labels.MetricName: name}
		for k, val := range lbls {
			m[k] = val
		}
		key := labels.FromMap(m).String()
		if _, seen := values[key]; !seen {
			order = append(order, key)
		}
		values[key] = v
	}
	names := make([]string, 0, len(families))
	for n := range families {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, m := range families[name].GetMetric() {
			lbls := map[string]string{}
			for _, lp := range m.GetLabel() {
				lbls[lp.GetName()] = lp.GetValue()
			}
			switch {
			case m.GetCounter() != nil:
				add(name, lbls, m.GetCounter().GetValue())
			case m.GetGauge() != nil:
				add(name, lbls, m.GetGauge().GetValue())
			case m.GetUntyped() != nil:
				add(name, lbls, m.GetUntyped().GetValue())
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				inf := false
				for _, b := range h.GetBucket() {
					inf = inf || math.IsInf(b.GetUpperBound(), 1)
					add(name+"_bucket", with(lbls, "le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)), float64(b.GetCumulativeCount()))
				}
				if !inf {
					add(name+"_bucket", with(lbls, "le", "+Inf"), float64(h.GetSampleCount()))
				}
				add(name+"_sum", lbls, h.GetSampleSum())
				add(name+"_count", lbls, float64(h.GetSampleCount()))
			case m.GetSummary() != nil:
				s := m.GetSummary()
				for _, q := range s.GetQuantile() {
					add(name, with(lbls, "quantile", strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64)), q.GetValue())
				}
				add(name+"_sum", lbls, s.GetSampleSum())
				add(name+"_count", lbls, float64(s.GetSampleCount()))
			}
		}
	}
	return order, values, nil
}

// scrapesSeries turns scrapes taken every `every` into series of the load syntax, one sample every
// interval from 0 to `samples` intervals: each sample is the series' value in the latest scrape
// taken by then, the last scrape held to the end; a series a scrape lacks is missing (_) while
// that scrape is the latest, as Prometheus would see a series that went away.
func scrapesSeries(scrapes []io.Reader, every, interval time.Duration, samples int) ([]string, error) {
	var order []string
	seen := map[string]bool{}
	var taken []map[string]float64
	for i, r := range scrapes {
		keys, values, err := scrapeSamples(r)
		if err != nil {
			return nil, fmt.Errorf("scrape %d: %w", i+1, err)
		}
		for _, k := range keys {
			if !seen[k] {
				seen[k] = true
				order = append(order, k)
			}
		}
		taken = append(taken, values)
	}
	out := make([]string, 0, len(order))
	for _, key := range order {
		var b strings.Builder
		b.WriteString(key)
		for k := 0; k <= samples; k++ {
			i := 0
			if every > 0 {
				i = min(int(time.Duration(k)*interval/every), len(taken)-1)
			}
			if v, ok := taken[i][key]; ok {
				b.WriteString(" " + strconv.FormatFloat(v, 'g', -1, 64))
			} else {
				b.WriteString(" _")
			}
		}
		out = append(out, b.String())
	}
	return out, nil
}

func with(lbls map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(lbls)+1)
	for a, b := range lbls {
		out[a] = b
	}
	out[k] = v
	return out
}

// files is a repeatable flag.
type files []string

func (f *files) String() string     { return strings.Join(*f, ",") }
func (f *files) Set(v string) error { *f = append(*f, v); return nil }

// Query is one query and the metric names it selects.
type Query struct {
	Source  string   `json:"source"`
	Expr    string   `json:"expr"`
	Metrics []string `json:"metrics"`
}

// Names is what names prints.
type Names struct {
	Queries []Query  `json:"queries"`
	Metrics []string `json:"metrics"`
}

func namesCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("names", flag.ContinueOnError)
	var dashboards, ruleFiles files
	fs.Var(&dashboards, "dashboard", "a Grafana dashboard's JSON (repeatable)")
	fs.Var(&ruleFiles, "rules", "rule file, PrometheusRule, or YAML stream holding one (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(dashboards)+len(ruleFiles) == 0 {
		return errors.New("names needs a -dashboard or -rules")
	}
	var queries []Query
	for _, path := range dashboards {
		qs, err := dashboardQueries(path)
		if err != nil {
			return err
		}
		queries = append(queries, qs...)
	}
	for _, path := range ruleFiles {
		raw, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("reading the rules: %w", err)
		}
		spec, err := ruleSpec(raw)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		content, err := yaml.Marshal(spec)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		groups, errs := rulefmt.Parse(content, false, model.UTF8Validation, parser.NewParser(parser.Options{}))
		if len(errs) > 0 {
			return fmt.Errorf("the rules of %s: %w", path, errors.Join(errs...))
		}
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				queries = append(queries, Query{Source: fmt.Sprintf("%s: rule %s%s", path, r.Alert, r.Record), Expr: r.Expr})
			}
		}
	}
	all := map[string]bool{}
	for i := range queries {
		names, err := metricNames(queries[i].Expr)
		if err != nil {
			return fmt.Errorf("%s: %w", queries[i].Source, err)
		}
		queries[i].Metrics = names
		for _, n := range names {
			all[n] = true
		}
	}
	res := Names{Queries: queries, Metrics: []string{}}
	for n := range all {
		res.Metrics = append(res.Metrics, n)
	}
	sort.Strings(res.Metrics)
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// panel is what names reads of a Grafana panel.
type panel struct {
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// dashboardQueries are the queries of every panel of a dashboard, rows' panels included.
func dashboardQueries(path string) ([]Query, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the dashboard: %w", err)
	}
	var d struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("parsing the dashboard %s: %w", path, err)
	}
	var out []Query
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				if t.Expr != "" {
					out = append(out, Query{Source: fmt.Sprintf("%s: panel %q", path, p.Title), Expr: grafanaVariables.Replace(t.Expr)})
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	if len(out) == 0 {
		return nil, fmt.Errorf("the dashboard %s has no query", path)
	}
	return out, nil
}

// grafanaVariables replaces Grafana's interval variables by a duration; variableRE the others.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "${__rate_interval}", "5m",
	"$__interval", "1m", "${__interval}", "1m", "$__range", "1h", "${__range}", "1h")

var variableRE = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`)

// metricNames are the metric names a query selects, sorted, each once.
func metricNames(query string) ([]string, error) {
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(variableRE.ReplaceAllString(query, ".*"))
	if err != nil {
		return nil, fmt.Errorf("parsing %q: %w", query, err)
	}
	var names []string
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			if name == "" {
				for _, m := range vs.LabelMatchers {
					if m.Name == labels.MetricName {
						name = m.Value
					}
				}
			}
			names = append(names, name)
		}
		return nil
	})
	sort.Strings(names)
	return slices.Compact(names), nil
}
