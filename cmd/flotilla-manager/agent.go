package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-dev/flotilla/pkg/logging"
	"github.com/flotilla-dev/flotilla/pkg/tunnel"
)

// agentOptions are the flags of flotilla-manager agent.
type agentOptions struct {
	cluster, address, caFile, serverName, tokenFile, upstream string
	logging                                                   logging.Options
}

// runAgent runs the agent of a secondary in pull mode: it holds the tunnel to the primary's
// manager and forwards what the manager sends through it to this cluster's API server.
func runAgent(args []string) int {
	o := agentOptions{upstream: inClusterAPIServer()}
	fs := pflag.NewFlagSet("flotilla-manager agent", pflag.ContinueOnError)
	fs.StringVar(&o.cluster, "cluster", "", "this cluster's name in the primary (its virtual node is flotilla-<name>)")
	fs.StringVar(&o.address, "tunnel-address", "", "HOST:PORT of the primary manager's tunnel endpoint (its --tunnel-bind-address, as this cluster reaches it)")
	fs.StringVar(&o.caFile, "tunnel-ca-file", "", "PEM bundle of the CA that signed the tunnel endpoint's certificate")
	fs.StringVar(&o.serverName, "tunnel-server-name", "", "name the endpoint's certificate must hold (default: the host of --tunnel-address)")
	fs.StringVar(&o.tokenFile, "token-file", "", "file holding this agent's credential in the primary: a token of the ServiceAccount flotilla-system/flotilla-agent-<cluster>, read again at every connection so a renewed one is used")
	fs.StringVar(&o.upstream, "upstream", o.upstream, "HOST:PORT the agent forwards the manager's connections to: this cluster's API server (default: the in-cluster address)")
	o.logging.AddFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "flotilla-manager agent holds a secondary's tunnel to the primary's manager: it dials out, proves "+
			"which cluster it serves, and forwards the manager's connections to this cluster's API server, whose TLS runs end to "+
			"end between them. Only the primary need be reachable from here.\n\nUsage:\n  flotilla-manager agent [flags]\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	agent, err := newAgent(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-manager agent:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := agent.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-manager agent:", err)
		return 1
	}
	return 0
}

// newAgent checks the flags and builds the agent they describe.
func newAgent(o agentOptions) (*tunnel.Agent, error) {
	var errs []error
	if msgs := validation.IsDNS1123Label(o.cluster); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--cluster %q: %s", o.cluster, strings.Join(msgs, "; ")))
	}
	for flag, v := range map[string]string{"--tunnel-address": o.address, "--upstream": o.upstream} {
		if _, _, err := net.SplitHostPort(v); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want HOST:PORT", flag, v))
		}
	}
	if o.tokenFile == "" {
		errs = append(errs, errors.New("--token-file: required"))
	}
	pool := x509.NewCertPool()
	if pem, err := os.ReadFile(o.caFile); err != nil {
		errs = append(errs, fmt.Errorf("--tunnel-ca-file: %w", err))
	} else if !pool.AppendCertsFromPEM(pem) {
		errs = append(errs, fmt.Errorf("--tunnel-ca-file %s: no PEM certificate", o.caFile))
	}
	log, err := logging.New(o.logging, os.Stderr)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return tunnel.NewAgent(tunnel.AgentOptions{
		Cluster: o.cluster, Address: o.address, Upstream: o.upstream,
		TLS: &tls.Config{RootCAs: pool, ServerName: o.serverName, MinVersion: tls.VersionTLS13},
		Token: func(context.Context) (string, error) {
			raw, err := os.ReadFile(o.tokenFile)
			if err != nil {
				return "", err
			}
			return strings.TrimSpace(string(raw)), nil
		},
	}, log.WithName("agent")), nil
}

// inClusterAPIServer is the address a pod reaches its cluster's API server at ("" outside one).
func inClusterAPIServer() string {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return ""
	}
	return net.JoinHostPort(host, port)
}
