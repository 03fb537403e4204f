package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// benchTunnel is the managers' tunnel endpoint in a pull-mode bench (--pull): every secondary is
// joined with --pull and reached only through an agent on this host, on loopback.
type benchTunnel struct {
	address, certDir, caFile string
	agents                   []*testbed.Process
}

// newBenchTunnel picks the endpoint's port and issues its certificate.
func newBenchTunnel(dir string) (*benchTunnel, error) {
	port, err := testbed.FreePort()
	if err != nil {
		return nil, err
	}
	certs, err := testbed.WriteTunnelCerts(dir, net.ParseIP("127.0.0.1"))
	if err != nil {
		return nil, err
	}
	t := &benchTunnel{address: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), certDir: certs.Dir, caFile: certs.CAFile}
	return t, nil
}

// managerArgs are a manager's flags for the endpoint (none without one).
func (t *benchTunnel) managerArgs() []string {
	if t == nil {
		return nil
	}
	return []string{"--tunnel-bind-address", t.address, "--tunnel-cert-dir", t.certDir}
}

// joinArgs are join's flags for pull mode (none without a tunnel).
func (t *benchTunnel) joinArgs() []string {
	if t == nil {
		return nil
	}
	return []string{"--pull", "--tunnel-address", t.address, "--tunnel-ca-file", t.caFile}
}

// startAgents starts each secondary's agent (the manager's binary) with the credential join left
// in the secondary, forwarding to that secondary's API server.
func (t *benchTunnel) startAgents(ctx context.Context, bed *testbed.Bed, bin, dir string) error {
	if t == nil {
		return nil
	}
	for _, c := range bed.Secondaries {
		s, err := c.Clientset.CoreV1().Secrets(flotillav1.SystemNamespace).Get(ctx, flotillav1.AgentSecretName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading the agent's Secret in %s: %w", c.Name, err)
		}
		tokenFile := filepath.Join(dir, "agent-"+c.Name+".token")
		if err := os.WriteFile(tokenFile, s.Data["token"], 0o600); err != nil {
			return err
		}
		u, err := url.Parse(c.RESTConfig.Host)
		if err != nil {
			return err
		}
		p, err := testbed.StartProcess("agent of "+c.Name, bin, []string{"agent", "--cluster", c.Name, "--tunnel-address", t.address,
			"--tunnel-ca-file", t.caFile, "--token-file", tokenFile, "--upstream", u.Host}, filepath.Join(dir, "agent-"+c.Name+".log"))
		if err != nil {
			return err
		}
		t.agents = append(t.agents, p)
	}
	return nil
}

// stop stops the agents.
func (t *benchTunnel) stop() {
	if t == nil {
		return
	}
	for _, a := range t.agents {
		_ = a.Stop(5 * time.Second)
	}
}

// joinCommand is flotillactl cluster join for a secondary, in pull mode with a tunnel.
func joinCommand(ctx context.Context, bin string, bed *testbed.Bed, c *testbed.Cluster, t *benchTunnel) *exec.Cmd {
	return exec.CommandContext(ctx, filepath.Join(bin, "flotillactl"), append([]string{"--kubeconfig", bed.KubeconfigPath,
		"--context", testbed.PrimaryName, "cluster", "join", "--secondary-context", c.Name}, t.joinArgs()...)...)
}

// startAndJoin starts the leader and joins every secondary, in pull mode with their agents when
// o.pull (o then gives every manager the tunnel's flags).
func startAndJoin(ctx context.Context, bed *testbed.Bed, bin, dir string, o *options) (*benchManager, string, *benchTunnel, error) {
	var tunnel *benchTunnel
	if o.pull {
		var err error
		if tunnel, err = newBenchTunnel(dir); err != nil {
			return nil, "", nil, err
		}
		o.managerArgs = tunnel.managerArgs()
	}
	mgr, leaderWebhook, err := startManager(filepath.Join(bin, "flotilla-manager"), bed.Primary.KubeconfigPath, dir, "", *o)
	if err != nil {
		return nil, "", nil, err
	}
	fail := func(err error) (*benchManager, string, *benchTunnel, error) {
		tunnel.stop()
		_ = mgr.Stop(20 * time.Second)
		return nil, "", nil, err
	}
	for _, c := range bed.Secondaries {
		if outb, err := joinCommand(ctx, bin, bed, c, tunnel).CombinedOutput(); err != nil {
			return fail(fmt.Errorf("joining %s: %w: %s", c.Name, err, outb))
		}
	}
	if err := tunnel.startAgents(ctx, bed, filepath.Join(bin, "flotilla-manager"), dir); err != nil {
		return fail(err)
	}
	return mgr, leaderWebhook, tunnel, nil
}
