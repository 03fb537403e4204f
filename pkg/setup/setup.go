package setup

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/flotilla-dev/flotilla/internal/apicalls"
	"github.com/flotilla-dev/flotilla/internal/clientca"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/tracing"
	"github.com/flotilla-dev/flotilla/pkg/version"
	"github.com/flotilla-dev/flotilla/webhook"
)

// Manager is the controller-runtime manager with all of Flotilla added to it; Start runs it.
type Manager struct {
	ctrl.Manager
	// Registry is the cluster registry that the controllers, the webhook, the virtual nodes and
	// the kubelet API share.
	Registry *clusters.Registry
	// Tracing is the tracer provider (nil: tracing off); Start flushes it when the manager stops.
	Tracing *tracing.Provider
}

// tracingFlushTimeout bounds the export of the last spans when the manager stops.
const tracingFlushTimeout = 5 * time.Second

// Start runs the manager until ctx ends, then exports the spans still batched.
func (m *Manager) Start(ctx context.Context) error {
	err := m.Manager.Start(ctx)
	flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingFlushTimeout)
	defer cancel()
	return errors.Join(err, m.Tracing.Shutdown(flush))
}

// NewScheme knows the core kinds, Flotilla's and the Multi-Cluster Services API's (the
// registry's scheme, clusters.NewScheme).
func NewScheme() *runtime.Scheme { return clusters.NewScheme() }

// New builds the manager for the primary that cfg reaches: its caches, the registry, every
// controller, the webhook, the virtual nodes and their kubelet API, and the health and readiness
// checks. It reads the primary and writes the webhook's certificate and the admission seal's key
// with ctx; the manager runs with the context given to Start.
func New(ctx context.Context, cfg *rest.Config, opts Options, log logr.Logger) (*Manager, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = opts.Manager.QPS, opts.Manager.Burst
	if cfg.UserAgent == "" {
		cfg.UserAgent = "flotilla-manager/" + version.Get().Version
	}
	if opts.Webhook.CertDir == "" {
		dir, err := os.MkdirTemp("", "flotilla-webhook-")
		if err != nil {
			return nil, fmt.Errorf("creating the webhook certificate directory: %w", err)
		}
		opts.Webhook.CertDir = dir
	}
	var callers *clientca.Pool
	var readCallers clientca.ReadFunc
	if len(opts.Webhook.ClientNames) > 0 {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("a client to read the cluster's client CA: %w", err)
		}
		callers, readCallers = &clientca.Pool{}, clientca.FromCluster(cs)
		if err := callers.Reload(ctx, readCallers); err != nil {
			return nil, fmt.Errorf("--webhook-client-names: the webhook's callers cannot be verified: %w", err)
		}
	}
	mgrOpts, err := managerOptions(opts, callers, log)
	if err != nil {
		return nil, err
	}
	opts.Tracing.Version = version.Get().Version
	hostname, _ := os.Hostname()
	opts.Tracing.Instance = cmp.Or(os.Getenv("POD_NAME"), hostname)
	tp, err := tracing.Start(ctx, opts.Tracing, log.WithName("tracing"))
	if err != nil {
		return nil, err
	}
	cfg.Wrap(apicalls.Wrap(apicalls.Primary))
	tp.WrapConfig(cfg)
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := addHealthChecks(mgr); err != nil {
		return nil, err
	}
	if callers != nil {
		// Every replica serves the webhook: the CA is kept fresh on each.
		if err := mgr.Add(everyReplica(func(ctx context.Context) error {
			callers.KeepReloaded(ctx, readCallers, clientca.ReloadEvery, log.WithName("webhook"))
			return nil
		})); err != nil {
			return nil, err
		}
	}
	registry, err := addClusters(ctx, mgr, opts, tp, log)
	if err != nil {
		return nil, err
	}
	if err := addElection(ctx, mgr, registry, opts, tp, log); err != nil {
		return nil, err
	}
	return &Manager{Manager: mgr, Registry: registry, Tracing: tp}, nil
}

// managerOptions are the controller-runtime manager's: caches, webhook server (verifying its
// callers' client certificates against callers, when set), metrics, probes and leader election.
func managerOptions(opts Options, callers *clientca.Pool, log logr.Logger) (ctrl.Options, error) {
	cacheOpts, err := cacheOptions()
	if err != nil {
		return ctrl.Options{}, err
	}
	metricsOpts := metricsserver.Options{BindAddress: opts.Manager.MetricsBindAddress, SecureServing: opts.Manager.MetricsSecure}
	if opts.Manager.MetricsSecure {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
		// The webhook's serving certificate, which names the metrics Service too and chains to the
		// CA the manager publishes: scrapers verify it, where controller-runtime's own would be
		// self-signed at each start and vouched for by nothing.
		metricsOpts.CertDir = opts.Webhook.CertDir
	}
	le := opts.LeaderElection
	tlsOpts := []func(*tls.Config){http1Only}
	if callers != nil {
		tlsOpts = append(tlsOpts, webhook.VerifyClients(callers.Get))
	}
	return ctrl.Options{
		Scheme: NewScheme(),
		Logger: log,
		Cache:  cacheOpts,
		WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{Host: opts.Webhook.BindHost, Port: opts.Webhook.Port,
			CertDir: opts.Webhook.CertDir, TLSOpts: tlsOpts}),
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        opts.Manager.HealthProbeBindAddress,
		PprofBindAddress:              opts.Manager.PprofBindAddress,
		LeaderElection:                le.Enabled,
		LeaderElectionID:              le.ID,
		LeaderElectionNamespace:       le.Namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &le.LeaseDuration,
		RenewDeadline:                 &le.RenewDeadline,
		RetryPeriod:                   &le.RetryPeriod,
	}, nil
}

// informersSyncedWithin is how long the readiness check waits for the informers: well inside
// the kubelet's 1 s probe timeout, a probe that waits would fail anyway.
const informersSyncedWithin = 100 * time.Millisecond

// addHealthChecks adds /healthz and the readiness of the manager's informers against the primary.
func addHealthChecks(mgr ctrl.Manager) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	cache := mgr.GetCache()
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		cctx, cancel := context.WithTimeout(req.Context(), informersSyncedWithin)
		defer cancel()
		if !cache.WaitForCacheSync(cctx) {
			return errors.New("informers not synced")
		}
		return nil
	}); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}
	return nil
}

// http1Only makes the webhook server speak HTTP/1.1 only: the API server calls a webhook behind a
// Service over HTTP/1.1 anyway (one connection per concurrent call, so calls spread over
// replicas), and HTTP/2's stream resets are a denial of service of their own (CVE-2023-44487).
// The out-of-cluster URL mode (the bench, make dev-up) then takes the path the chart's does.
func http1Only(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }

// everyReplica is a runnable that runs on every replica, leader or not.
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (everyReplica) NeedLeaderElection() bool          { return false }
