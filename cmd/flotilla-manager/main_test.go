package main

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/flotilla-dev/flotilla/pkg/setup"
)

func parse(t *testing.T, args ...string) options {
	t.Helper()
	t.Setenv("POD_IP", "")
	t.Setenv("FLOTILLA_CONTAINER_MEMORY_LIMIT", "")
	o := newOptions()
	fs := pflag.NewFlagSet("flotilla-manager", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parsing %q: %v", args, err)
	}
	o.applyNamePrefix(fs)
	return o
}

// --name-prefix (the chart's fullnameOverride) names the manager's objects; an explicit Lease or
// Service name still wins, and a prefix no Service name could carry is refused.
func TestNamePrefixNamesTheManagersObjects(t *testing.T) {
	m := parse(t, "--name-prefix=fleet").manager
	for what, c := range map[string]struct{ got, want string }{
		"webhook configuration": {m.Names.WebhookConfiguration, "fleet"},
		"Lease":                 {m.LeaderElection.ID, "fleet-manager.flotilla.dev"},
		"webhook Service":       {m.Webhook.Service, "fleet-webhook"},
		"metrics Service":       {m.Names.MetricsService, "fleet-manager-metrics"},
		"CA ConfigMap":          {m.Names.CAConfigMap, "fleet-ca"},
		"seal Secret":           {m.Names.SealSecret, "fleet-admission-seal"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", what, c.got, c.want)
		}
	}
	m = parse(t, "--name-prefix=fleet", "--webhook-service=hooks", "--leader-election-id=lead").manager
	if m.Webhook.Service != "hooks" || m.LeaderElection.ID != "lead" {
		t.Errorf("explicit flags lost: Service %q, Lease %q", m.Webhook.Service, m.LeaderElection.ID)
	}
	for _, bad := range []string{"", "Fleet", "fleet_1", strings.Repeat("a", 41)} {
		if err := parse(t, "--name-prefix="+bad).manager.Validate(); err == nil || !strings.Contains(err.Error(), "--name-prefix") {
			t.Errorf("--name-prefix=%q: %v, want a refusal naming the flag", bad, err)
		}
	}
}

func TestFlagsDefaultToSetupsDefaults(t *testing.T) {
	if got, want := parse(t).manager, setup.DefaultOptions(); !reflect.DeepEqual(got, want) {
		t.Errorf("the flags' defaults are not setup.DefaultOptions():\n got %+v\nwant %+v", got, want)
	}
}

func TestFlagsFillSetupOptions(t *testing.T) {
	o := parse(t, "--leader-elect=false", "--leader-election-namespace=ops", "--probe-interval=1s", "--probe-timeout=3s",
		"--kube-api-qps=200", "--kube-api-burst=400", "--accept-admiralty-annotation=false", "--webhook-cert-dir=/certs",
		"--webhook-ca-injected-from=ops/flotilla-webhook", "--failover-after=45s", "--proxy-workers=8", "--pod-network=flat",
		"--replication-timeout=5s", "--log-level=debug")
	m := o.manager
	for name, c := range map[string]struct{ got, want any }{
		"leader election":    {m.LeaderElection.Enabled, false},
		"lease namespace":    {m.LeaderElection.Namespace, "ops"},
		"probe interval":     {m.Clusters.ProbeInterval, time.Second},
		"probe timeout":      {m.Clusters.ProbeTimeout, 3 * time.Second},
		"QPS":                {m.Manager.QPS, float32(200)},
		"burst":              {m.Manager.Burst, 400},
		"admiralty":          {m.Election.AcceptAdmiralty, false},
		"certificate dir":    {m.Webhook.CertDir, "/certs"},
		"CA injected from":   {m.Webhook.CAInjectedFrom, "ops/flotilla-webhook"},
		"failover after":     {m.VirtualNodes.FailoverAfter, 45 * time.Second},
		"proxy workers":      {m.Election.ProxyWorkers, 8},
		"pod network":        {m.Election.PodNetwork, setup.PodNetworkFlat},
		"replication budget": {m.Replicator.Timeout, 5 * time.Second},
		"log level":          {o.logging.Level, "debug"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", name, c.got, c.want)
		}
	}
}

// The chart passes these flags (templates/deployment.yaml): each must still exist.
func TestEveryFlagTheChartPassesExists(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "charts", "flotilla", "templates", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	o := newOptions()
	fs := pflag.NewFlagSet("flotilla-manager", pflag.ContinueOnError)
	o.addFlags(fs)
	passed := regexp.MustCompile(`(?m)^\s*- --([a-z0-9-]+)=`).FindAllSubmatch(raw, -1)
	if len(passed) == 0 {
		t.Fatal("no flag found in the chart's Deployment")
	}
	for _, m := range passed {
		if fs.Lookup(string(m[1])) == nil {
			t.Errorf("the chart passes --%s, which flotilla-manager does not define", m[1])
		}
	}
}

func TestAgentFlagsAreCheckedBeforeAnyDial(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := newAgent(agentOptions{cluster: "Edge_1", address: "primary.example.com", caFile: ca})
	for _, want := range []string{`--cluster "Edge_1"`, `--tunnel-address "primary.example.com": want HOST:PORT`,
		`--upstream "": want HOST:PORT`, "--token-file: required", "no PEM certificate"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("newAgent = %v; want it to say %q", err, want)
		}
	}
}
