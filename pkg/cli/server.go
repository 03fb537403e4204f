package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

const serverFlagHelp = "API server URL the manager uses for this secondary (default: the context's own). " +
	"Give it when the kubeconfig's URL is only good where you run flotillactl, e.g. https://127.0.0.1:PORT " +
	"of a local cluster and a manager running in a pod; the serving certificate must be valid for it"

// serverCheckTimeout bounds the check of --server from where flotillactl runs.
const serverCheckTimeout = 10 * time.Second

// registeredCluster is the cluster entry to register: the context's own, with server in place of
// its URL when given. Only https is accepted: the registered credentials travel with every call.
func registeredCluster(own *clientcmdapi.Cluster, server string) (*clientcmdapi.Cluster, error) {
	c := own.DeepCopy()
	if server == "" {
		return c, nil
	}
	u, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("--server %q: %w", server, err)
	}
	if u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("--server %q: want an https URL with a host, such as https://10.0.0.5:6443", server)
	}
	c.Server = server
	return c, nil
}

// loopbackWarning is what join and add say when the URL they register is this machine's own
// loopback ("" otherwise): right for a manager run on this machine, never reached by one in a pod,
// where the cluster would then stay Unknown ("connection refused") with no word at join.
func loopbackWarning(server string) string {
	u, err := url.Parse(server)
	if err != nil {
		return ""
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return ""
	}
	return fmt.Sprintf("Warning: %s is this machine's loopback address. A manager running here reaches it; one running in a pod "+
		"does not, and the cluster would stay Unknown (connection refused). Join again with --server and an address the manager "+
		"reaches (the host's address, as the certificate allows).\n", server)
}

// checkServer proves, where it can, that --server is the same cluster as the context: the same
// credentials must reach it and it must answer with the same identity. A URL that only the manager
// can reach (an in-cluster name, another network) cannot be checked from here; that is reported and
// registered anyway, and the secondary's ClusterDetector says whether the manager reaches it.
func checkServer(ctx context.Context, user *clientcmdapi.Config, contextName, server string, own client.Client, out io.Writer) error {
	if server == "" {
		return nil
	}
	want, err := clusters.ClusterID(ctx, own)
	if err != nil {
		return fmt.Errorf("context %s: %w", contextName, err)
	}
	cfg := user.DeepCopy()
	cfg.Clusters[cfg.Contexts[contextName].Cluster].Server = server
	there, _, err := clientFor(cfg, contextName)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, serverCheckTimeout)
	defer cancel()
	got, err := clusters.ClusterID(ctx, there)
	var invalid *tls.CertificateVerificationError
	if errors.As(err, &invalid) {
		// The manager verifies with the same CA data: it would fail just the same.
		return fmt.Errorf("--server %s does not present a certificate context %s trusts for that address: "+
			"another cluster, or a certificate that does not cover the address: %w", server, contextName, err)
	}
	if err != nil {
		_, werr := fmt.Fprintf(out, "Warning: --server %s could not be checked from here (%v); registering it anyway. "+
			"The manager must reach it: its ClusterDetector says whether it does.\n", server, err)
		return werr
	}
	if got != want {
		return fmt.Errorf("--server %s answers as another cluster (kube-system %s) than context %s (kube-system %s)", server, got, contextName, want)
	}
	return nil
}
