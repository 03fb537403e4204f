// Command flotilla-manager runs Flotilla in the primary cluster: the admission webhook, one virtual
// node per secondary and the controllers, in one process with leader election. It runs in cluster
// (its ServiceAccount) or out of cluster with --kubeconfig.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/flotilla-dev/flotilla/pkg/logging"
	"github.com/flotilla-dev/flotilla/pkg/version"
)

var (
	scheme   = runtime.NewScheme()
	setupLog = ctrl.Log.WithName("setup")
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
}

type options struct {
	kubeconfig              string
	kubecontext             string
	metricsAddr             string
	metricsSecure           bool
	probeAddr               string
	leaderElect             bool
	leaderElectionNamespace string
	leaderElectionID        string
	qps                     float32
	burst                   int
	showVersion             bool
	logging                 logging.Options
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the primary cluster; empty: in-cluster config, else $KUBECONFIG or ~/.kube/config")
	fs.StringVar(&o.kubecontext, "context", "", "context of --kubeconfig to use (default: its current context)")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "address of the Prometheus metrics endpoint; \"0\" turns it off")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS, authenticated (TokenReview) and authorised (SubjectAccessReview on /metrics)")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader among replicas, so one runs the controllers at a time")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "flotilla-system", "namespace of the leader election Lease (in cluster: the pod's namespace when empty)")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "flotilla-manager.flotilla.dev", "name of the leader election Lease")
	fs.Float32Var(&o.qps, "kube-api-qps", 200, "queries per second to the primary's API server (client-go's default of 5 would throttle Flotilla)")
	fs.IntVar(&o.burst, "kube-api-burst", 400, "burst of queries to the primary's API server")
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	o.logging.AddFlags(fs)
}

func main() {
	var opts options
	fs := pflag.NewFlagSet("flotilla-manager", pflag.ContinueOnError)
	opts.addFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "flotilla-manager runs Flotilla in the primary cluster.\n\nUsage:\n  flotilla-manager [flags]\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if opts.showVersion {
		fmt.Println("flotilla-manager", version.Get())
		return
	}
	log, err := logging.New(opts.logging, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-manager:", err)
		os.Exit(2)
	}
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	if err := run(ctrl.SetupSignalHandler(), opts); err != nil {
		setupLog.Error(err, "Manager stopped")
		os.Exit(1)
	}
}

func run(ctx context.Context, opts options) error {
	setupLog.Info("Starting", "version", version.Get().String())
	cfg, err := restConfig(opts.kubeconfig, opts.kubecontext)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = opts.qps, opts.burst
	cfg.UserAgent = "flotilla-manager/" + version.Get().Version

	metricsOpts := metricsserver.Options{BindAddress: opts.metricsAddr, SecureServing: opts.metricsSecure}
	if opts.metricsSecure {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        opts.probeAddr,
		LeaderElection:                opts.leaderElect,
		LeaderElectionID:              opts.leaderElectionID,
		LeaderElectionNamespace:       opts.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	cache := mgr.GetCache()
	// Ready once the manager's informers have synced against the primary.
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		cctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !cache.WaitForCacheSync(cctx) {
			return errors.New("informers not synced")
		}
		return nil
	}); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}
	setupLog.Info("Starting manager", "host", cfg.Host, "leaderElection", opts.leaderElect)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
}

// restConfig loads the primary's config: the named kubeconfig, else in-cluster, else the default rules.
func restConfig(path, context string) (*rest.Config, error) {
	if path == "" && context == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig (--kubeconfig %q, --context %q): %w", path, context, err)
	}
	return cfg, nil
}
