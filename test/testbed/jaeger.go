package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"text/template"
	"time"
)

// With Options.Tracing the bed has a tracing backend: one Jaeger v2 (built by `make tools` from
// test/tools/jaeger), OTLP gRPC in at the host's address (the API servers and a manager on the
// host or in a real node's pod reach it), its query API out at 127.0.0.1, traces in memory. Every
// API server of the bed traces every request to it (a TracingConfiguration sampling them all), so
// that a span the manager passes on, and the API server's own, land in the same backend. Jaeger is
// recorded in the bed's folder: Stop, StopDir and PIDs know it as they know the clusters.

const (
	jaegerName       = "jaeger"
	jaegerVersionKey = "JAEGER_VERSION"
	// jaegerMaxTraces bounds the backend's memory: every API server request of the bed is a trace.
	jaegerMaxTraces = 20000
)

// Jaeger is the bed's tracing backend.
type Jaeger struct {
	// OTLPEndpoint is where spans are sent, OTLP over gRPC without TLS: host:port.
	OTLPEndpoint string
	// QueryURL is Jaeger's query API (and UI): QueryURL+"/api/traces/<id>".
	QueryURL string
	// PID is Jaeger's process (the bench reads its CPU time).
	PID int
}

// jaegerConfig is what Jaeger's configuration is rendered from.
type jaegerConfig struct {
	OTLP, Query, QueryGRPC, Health string
	MaxTraces                      int
}

// jaegerConfigTmpl: an OpenTelemetry Collector configuration with Jaeger's extensions: OTLP
// receivers, memory storage, the query service, no telemetry of its own (no port for it).
var jaegerConfigTmpl = template.Must(template.New("jaeger").Parse(`service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: {{.Health}}
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: {{.MaxTraces}}
  jaeger_query:
    storage:
      traces: memstore
    enable_tracing: false
    http:
      endpoint: {{.Query}}
    grpc:
      endpoint: {{.QueryGRPC}}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: {{.OTLP}}
processors:
  batch:
    timeout: 200ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`))

func renderJaegerConfig(cfg jaegerConfig) ([]byte, error) {
	var b bytes.Buffer
	if err := jaegerConfigTmpl.Execute(&b, cfg); err != nil {
		return nil, fmt.Errorf("rendering Jaeger's configuration: %w", err)
	}
	return b.Bytes(), nil
}

// apiServerTracingConfig is every API server's --tracing-config-file: all requests sampled.
const apiServerTracingConfig = `apiVersion: apiserver.config.k8s.io/v1
kind: TracingConfiguration
endpoint: %s
samplingRatePerMillion: 1000000
`

func jaegerDir(workDir string) string { return filepath.Join(workDir, jaegerName) }

func jaegerPIDFile(workDir string) string {
	return filepath.Join(jaegerDir(workDir), jaegerName+".pid")
}

// apiServerTracingPath is the API servers' tracing configuration, written before they start.
func apiServerTracingPath(workDir string) string {
	return filepath.Join(jaegerDir(workDir), "apiserver-tracing.yaml")
}

// startJaeger starts the bed's Jaeger, writes the API servers' tracing configuration, and returns
// once Jaeger answers its health check.
func (b *Bed) startJaeger(ctx context.Context) error {
	version, err := toolVersion(jaegerVersionKey)
	if err != nil {
		return err
	}
	bin := filepath.Join(b.tools.toolsDir, jaegerName+"-"+version)
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("no Jaeger %s in the tools (make tools): %w", version, err)
	}
	hostIP, err := HostIP()
	if err != nil {
		return fmt.Errorf("the host's address, where the API servers send their spans: %w", err)
	}
	ports := make([]int, 4)
	for i := range ports {
		if ports[i], err = FreePort(); err != nil {
			return err
		}
	}
	cfg := jaegerConfig{
		OTLP:      net.JoinHostPort(hostIP.String(), strconv.Itoa(ports[0])),
		Query:     net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
		QueryGRPC: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2])),
		Health:    net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3])),
		MaxTraces: jaegerMaxTraces,
	}
	raw, err := renderJaegerConfig(cfg)
	if err != nil {
		return err
	}
	dir := jaegerDir(b.WorkDir)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, raw, 0o600); err != nil {
		return fmt.Errorf("writing Jaeger's configuration: %w", err)
	}
	if err := os.WriteFile(apiServerTracingPath(b.WorkDir), fmt.Appendf(nil, apiServerTracingConfig, cfg.OTLP), 0o600); err != nil {
		return fmt.Errorf("writing the API servers' tracing configuration: %w", err)
	}
	pid, err := StartDaemon(jaegerName, bin, []string{"--config", config}, filepath.Join(dir, jaegerName+".log"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(jaegerPIDFile(b.WorkDir), []byte(strconv.Itoa(pid)), 0o600); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return fmt.Errorf("recording Jaeger: %w", err)
	}
	b.Jaeger = &Jaeger{OTLPEndpoint: cfg.OTLP, QueryURL: "http://" + cfg.Query, PID: pid}
	health := "http://" + cfg.Health + "/status"
	err = WaitHTTPOK(ctx, health, 30*time.Second, func() bool { return processAlive(pid) })
	if err != nil {
		return fmt.Errorf("waiting for Jaeger at %s (log: %s): %w", health, filepath.Join(dir, jaegerName+".log"), err)
	}
	fmt.Fprintf(b.log, "testbed: Jaeger %s: OTLP at %s, query at %s\n", version, b.Jaeger.OTLPEndpoint, b.Jaeger.QueryURL)
	return nil
}

// stopJaeger stops the Jaeger recorded under workDir, if any.
func stopJaeger(workDir string) error {
	pid := readPIDFile(jaegerPIDFile(workDir))
	if pid == 0 {
		return nil
	}
	if left := killAndWait([]int{pid}, 5*time.Second); len(left) > 0 {
		return fmt.Errorf("jaeger (pid %d) still running after SIGKILL", pid)
	}
	if err := os.Remove(jaegerPIDFile(workDir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("forgetting Jaeger: %w", err)
	}
	return nil
}
