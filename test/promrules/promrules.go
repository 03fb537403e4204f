package promrules

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// timeout bounds one run of the tool.
const timeout = 2 * time.Minute

// Binary is the tool in the tools cache.
func Binary() (string, error) {
	dir := os.Getenv("FLOTILLA_TOOLS_DIR")
	if dir == "" {
		return "", errors.New("FLOTILLA_TOOLS_DIR is not set: run through make (test/tools/install.sh promrules builds the tool)")
	}
	bin := filepath.Join(dir, "promrules")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("no promrules in %s (test/tools/install.sh promrules builds it): %w", dir, err)
	}
	return bin, nil
}

// Run runs the tool with args and returns its standard output; a non-zero exit is an error that
// carries its standard error, and the output is returned with it.
func Run(ctx context.Context, args ...string) (string, error) {
	bin, err := Binary()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("promrules %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// Alert is one alert active at the end of an evaluation.
type Alert struct {
	Name      string            `json:"alertname"`
	State     string            `json:"state"`
	Labels    map[string]string `json:"labels"`
	ActiveFor string            `json:"activeFor"`
}

// Firing says whether the alert fires (its condition held for its `for:`), not only pending.
func (a Alert) Firing() bool { return a.State == "firing" }

// EvalScrape replays one scrape of a /metrics endpoint (the text exposition format) as constant
// series from 0 to at, evaluates the rules (a rule file, a PrometheusRule or a YAML stream with
// one) over them, and returns the alerts active at at.
func EvalScrape(ctx context.Context, rulesFile, scrapeFile string, at time.Duration) ([]Alert, error) {
	return EvalScrapes(ctx, rulesFile, []string{scrapeFile}, 0, at)
}

// EvalScrapes replays scrapes of one target taken every `every`, in order (the last held to at),
// evaluates the rules over them, and returns the alerts active at at: a counter that rose between
// two scrapes has a rate, a series one scrape lacks is missing while that scrape is the latest.
func EvalScrapes(ctx context.Context, rulesFile string, scrapeFiles []string, every, at time.Duration) ([]Alert, error) {
	args := []string{"eval", "-rules", rulesFile, "-at", at.String(), "-interval", "30s", "-scrape-every", every.String()}
	for _, f := range scrapeFiles {
		args = append(args, "-scrape", f)
	}
	out, err := Run(ctx, args...)
	if err != nil {
		return nil, err
	}
	var res struct {
		Alerts []Alert `json:"alerts"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		return nil, fmt.Errorf("reading promrules eval's answer %q: %w", out, err)
	}
	return res.Alerts, nil
}

// Query is one query of a dashboard or a rule file and the metric names it selects.
type Query struct {
	Source  string   `json:"source"`
	Expr    string   `json:"expr"`
	Metrics []string `json:"metrics"`
}

// Names parses every query of the dashboards and rule files with Prometheus's parser and returns
// them with the metric names each selects.
func Names(ctx context.Context, dashboards, ruleFiles []string) ([]Query, error) {
	var args []string
	for _, d := range dashboards {
		args = append(args, "-dashboard", d)
	}
	for _, r := range ruleFiles {
		args = append(args, "-rules", r)
	}
	out, err := Run(ctx, append([]string{"names"}, args...)...)
	if err != nil {
		return nil, err
	}
	var res struct {
		Queries []Query `json:"queries"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		return nil, fmt.Errorf("reading promrules names' answer: %w", err)
	}
	return res.Queries, nil
}

// Served lists the names of the series a scrape (the text exposition format) holds: a histogram
// is served as its _bucket, _sum and _count series, which is what queries name.
func Served(scrape string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(scrape, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name := line
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
		}
		out[name] = true
	}
	return out
}
