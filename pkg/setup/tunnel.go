package setup

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/tunnel"
)

// leaderOnly is a runnable of the leader alone.
type leaderOnly func(context.Context) error

func (f leaderOnly) Start(ctx context.Context) error { return f(ctx) }
func (leaderOnly) NeedLeaderElection() bool          { return true }

// addTunnel adds the tunnel endpoint the agents of pulled secondaries dial (--tunnel-bind-address):
// the leader alone listens, since its registry is the one whose informers and writes reach the
// secondaries; an agent that reaches a standby's address finds no listener and tries again. It
// returns nil when no tunnel is configured.
func addTunnel(mgr ctrl.Manager, primary kubernetes.Interface, opts ClusterOptions, log logr.Logger) (*tunnel.Server, error) {
	if opts.TunnelBindAddress == "" {
		return nil, nil
	}
	watcher, err := certwatcher.New(filepath.Join(opts.TunnelCertDir, "tls.crt"), filepath.Join(opts.TunnelCertDir, "tls.key"))
	if err != nil {
		return nil, fmt.Errorf("reading the tunnel's serving certificate from %s: %w", opts.TunnelCertDir, err)
	}
	if err := mgr.Add(watcher); err != nil {
		return nil, fmt.Errorf("adding the tunnel certificate's watcher: %w", err)
	}
	server := tunnel.NewServer(tunnel.Options{
		Authenticate: tunnel.TokenReviewer{Reviews: primary.AuthenticationV1().TokenReviews(), Namespace: flotillav1.SystemNamespace}.Authenticate,
	}, log)
	serve := leaderOnly(func(ctx context.Context) error {
		l, err := net.Listen("tcp", opts.TunnelBindAddress)
		if err != nil {
			return fmt.Errorf("listening for tunnel agents on %s: %w", opts.TunnelBindAddress, err)
		}
		log.Info("Accepting tunnel agents", "address", l.Addr().String())
		tl := tls.NewListener(l, &tls.Config{GetCertificate: watcher.GetCertificate, MinVersion: tls.VersionTLS13})
		return server.Serve(ctx, tl)
	})
	if err := mgr.Add(serve); err != nil {
		return nil, fmt.Errorf("adding the tunnel endpoint: %w", err)
	}
	return server, nil
}
