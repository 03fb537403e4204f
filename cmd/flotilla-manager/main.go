// Command flotilla-manager runs Flotilla in the primary cluster: the admission webhook, one virtual
// node per secondary and the controllers, in one process with leader election. It runs in cluster
// (its ServiceAccount) or out of cluster with --kubeconfig. Its flags fill setup.Options, whose
// defaults they show; pkg/setup wires the manager.
package main

import (
	"log/slog"

	"context"
	"errors"
	"fmt"
	"os"

	"github.com/go-logr/logr"

	"github.com/spf13/pflag"
	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	vkslog "github.com/virtual-kubelet/virtual-kubelet/log/slog"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/logging"
	"github.com/flotilla-dev/flotilla/pkg/setup"
	"github.com/flotilla-dev/flotilla/pkg/tracing"
	"github.com/flotilla-dev/flotilla/pkg/version"
)

var setupLog = ctrl.Log.WithName("setup")

// options are the process's own flags and the manager's (setup.Options).
type options struct {
	kubeconfig           string
	kubecontext          string
	containerMemoryLimit string
	showVersion          bool
	logging              logging.Options
	manager              setup.Options
	namePrefix           string
}

// newOptions are the defaults: setup.DefaultOptions, and what the environment says.
func newOptions() options {
	o := options{containerMemoryLimit: os.Getenv("FLOTILLA_CONTAINER_MEMORY_LIMIT"), manager: setup.DefaultOptions()}
	o.manager.VirtualNodes.Address = os.Getenv("POD_IP")
	return o
}

// addFlags binds every flag to o; each flag's default is the value o holds.
func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "kubeconfig of the primary cluster; empty: in-cluster config, else $KUBECONFIG or ~/.kube/config")
	fs.StringVar(&o.kubecontext, "context", o.kubecontext, "context of --kubeconfig to use (default: its current context)")
	fs.StringVar(&o.containerMemoryLimit, "container-memory-limit", o.containerMemoryLimit, "the container's memory limit (bytes or a quantity such as 512Mi; the chart passes limits.memory through the downward API, $FLOTILLA_CONTAINER_MEMORY_LIMIT): Go's soft memory limit is set to 90% of it, so the heap is collected before it reaches the limit (GOMEMLIMIT, when set, wins)")
	fs.BoolVar(&o.showVersion, "version", o.showVersion, "print the version and exit")
	fs.StringVar(&o.namePrefix, "name-prefix", o.manager.Names.Prefix, "prefix of the names of the manager's own objects (the chart's fullname): its MutatingWebhookConfiguration <prefix>, "+
		"in its namespace the Services <prefix>-webhook and <prefix>-manager-metrics, the Secrets <prefix>-webhook-ca and <prefix>-admission-seal, the ConfigMap <prefix>-ca "+
		"(the CA's certificate, for scrapers) and the Lease <prefix>-manager.flotilla.dev; --leader-election-id and --webhook-service, when given, win")
	o.logging.AddFlags(fs)
	addManagerFlags(fs, &o.manager.Manager)
	addLeaderElectionFlags(fs, &o.manager.LeaderElection)
	addClusterFlags(fs, &o.manager.Clusters, &o.manager.VirtualNodes)
	addWebhookFlags(fs, &o.manager.Webhook)
	addElectionFlags(fs, &o.manager.Election)
	addReplicatorFlags(fs, &o.manager.Replicator)
	addTracingFlags(fs, &o.manager.Tracing)
}

func addTracingFlags(fs *pflag.FlagSet, o *tracing.Options) {
	fs.StringVar(&o.Endpoint, "tracing-endpoint", o.Endpoint, "OpenTelemetry collector that receives the manager's spans over OTLP gRPC: host:port (plain text) or an http:// or https:// URL; empty turns tracing off. An elected pod's spans (admission, reconciles, the delegate's creation, the status write, release) form one trace with the API servers' own, whose context the manager passes on")
	fs.Float64Var(&o.SamplingRate, "tracing-sampling-rate", o.SamplingRate, "fraction (0 to 1) of the traces the manager starts that are kept; a span whose parent was sampled (an API server's, an elected pod's admission) is kept whatever the rate")
}

func addManagerFlags(fs *pflag.FlagSet, o *setup.ManagerOptions) {
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "address of the Prometheus metrics endpoint; \"0\" turns it off")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "serve metrics over HTTPS, authenticated (TokenReview) and authorised (SubjectAccessReview on /metrics)")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "address of /healthz and /readyz")
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", o.PprofBindAddress, "address of Go's /debug/pprof profiles, unauthenticated: bind it to 127.0.0.1 (default: off)")
	fs.Float32Var(&o.QPS, "kube-api-qps", o.QPS, "queries per second to the primary's API server (client-go's default of 5 would throttle Flotilla)")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "burst of queries to the primary's API server")
}

func addLeaderElectionFlags(fs *pflag.FlagSet, o *setup.LeaderElectionOptions) {
	fs.BoolVar(&o.Enabled, "leader-elect", o.Enabled, "elect a leader among replicas, so one runs the controllers at a time")
	fs.StringVar(&o.Namespace, "leader-election-namespace", o.Namespace, "namespace of the leader election Lease (in cluster: the pod's namespace when empty)")
	fs.StringVar(&o.ID, "leader-election-id", o.ID, "name of the leader election Lease")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "how long a standby waits, after the leader's last renewal, before it takes the lead: the time without a leader after the leader dies without releasing its Lease")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "how long the leader keeps trying to renew its Lease before it gives up the lead and exits (less than --leader-elect-lease-duration)")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "time between two tries to take or renew the Lease")
}

func addClusterFlags(fs *pflag.FlagSet, c *setup.ClusterOptions, n *setup.VirtualNodeOptions) {
	fs.StringVar(&c.PrimaryName, "primary-name", c.PrimaryName, "name of the primary's ClusterDetector, and its cluster name in the Multi-Cluster Services ClusterSet (the source-cluster of its endpoints)")
	fs.StringSliceVar(&c.InventoryNamespaces, "inventory-namespaces", c.InventoryNamespaces,
		"namespaces of the fleet inventory's readers (MultiKueue's kueue-system, comma-separated): each gets every secondary's ClusterProfile with its access provider "+
			"(secretreader) and, for a secondary reached directly, the Secret that provider reads, holding the joined identity's token (anyone who may read Secrets there acts as Flotilla in that secondary)")
	fs.BoolVar(&c.MulticlusterServices, "multicluster-services", c.MulticlusterServices, "run the Multi-Cluster Services controller: a ServiceExport in any cluster of the set makes its ServiceImport, with every exporting cluster's endpoints, in all (needs the MCS API's CRDs, multicluster.x-k8s.io, in the primary)")
	fs.DurationVar(&c.ProbeInterval, "probe-interval", c.ProbeInterval, "time between two health probes of a registered cluster")
	fs.DurationVar(&c.ProbeTimeout, "probe-timeout", c.ProbeTimeout, "how long a cluster may take to answer a health probe before it counts as failed")
	fs.Float64Var(&c.TokenRenewalFraction, "token-renewal-fraction", c.TokenRenewalFraction, "renew a registered ServiceAccount token once this fraction of its lifetime has passed")
	fs.StringVar(&c.TunnelBindAddress, "tunnel-bind-address", c.TunnelBindAddress, "where the leader accepts the agents of secondaries registered in pull mode (flotilla.dev/cluster-modes on the registration Secret), which dial out to it and carry its connections to their API servers; empty: no tunnel")
	fs.StringVar(&c.TunnelCertDir, "tunnel-cert-dir", c.TunnelCertDir, "folder of the tunnel endpoint's serving certificate (tls.crt, tls.key), read again when it changes; the agents verify it against the CA they were given at join")
	fs.DurationVar(&c.AgentCredentialLifetime, "agent-credential-lifetime", c.AgentCredentialLifetime, "life of the credential the leader gives each pulled secondary's agent (a token of the primary's ServiceAccount flotilla-system/flotilla-agent-<cluster>, written into that secondary's Secret flotilla-system/flotilla-agent through the tunnel), replaced past --token-renewal-fraction of it")
	fs.StringVar(&n.Address, "node-address", n.Address, "InternalIP the virtual nodes advertise (default $POD_IP, else 127.0.0.1)")
	fs.Int32Var(&n.KubeletPort, "kubelet-port", n.KubeletPort, "first port of the virtual nodes' kubelet APIs (kubectl logs/exec on proxies, the API server's node proxy, metrics-server): each virtual node gets one of --kubelet-port-count ports from it, advertised on its Node and served by every replica; 0 turns them off")
	fs.Int32Var(&n.KubeletPortCount, "kubelet-port-count", n.KubeletPortCount, "how many ports from --kubelet-port the virtual nodes' kubelet APIs are given, one per virtual node")
	fs.DurationVar(&n.FailoverAfter, "failover-after", n.FailoverAfter, "how long a secondary stays Unknown before its virtual node is tainted flotilla.dev/unreachable:NoExecute (its proxies are then evicted after their flotilla.dev/failover-seconds)")
}

func addWebhookFlags(fs *pflag.FlagSet, o *setup.WebhookOptions) {
	fs.IntVar(&o.Port, "webhook-port", o.Port, "port of the admission webhook (TLS)")
	fs.StringVar(&o.BindHost, "webhook-bind-host", o.BindHost, "address the webhook binds (default: all)")
	fs.StringVar(&o.URL, "webhook-url", o.URL, "URL the API server uses to reach the webhook, e.g. https://127.0.0.1:9443 when the manager runs out of cluster (default: the Service --webhook-service)")
	fs.StringVar(&o.Service, "webhook-service", o.Service, "Service of the webhook in the manager's namespace (in cluster)")
	fs.StringVar(&o.CertDir, "webhook-cert-dir", o.CertDir, "where the webhook's serving certificate is written (default: a new temporary directory)")
	fs.StringSliceVar(&o.ClientNames, "webhook-client-names", o.ClientNames, "serve the admission webhook only to callers with a client certificate of the cluster's client CA (kube-system/extension-apiserver-authentication) and one of these common names: the certificate the API server's --admission-control-config-file gives it for webhooks (docs/install.md). Empty: any caller")
	fs.StringVar(&o.CAInjectedFrom, "webhook-ca-injected-from", o.CAInjectedFrom, "NAMESPACE/NAME of a cert-manager Certificate whose Secret is mounted at --webhook-cert-dir: the manager issues no certificate of its own and leaves the webhook configuration's caBundle to cert-manager's CA injector (the chart's webhook.certManager.enabled)")
}

func addElectionFlags(fs *pflag.FlagSet, o *setup.ElectionOptions) {
	fs.StringVar(&o.ProxyPlacement, "proxy-placement", o.ProxyPlacement, "who binds a proxy to one of its feasible virtual nodes: webhook (at admission: a controller's replicas spread over clusters, ties weighted by free CPU; no scheduling cycle or bind call per pod) or scheduler (the primary's kube-scheduler)")
	fs.BoolVar(&o.AcceptAdmiralty, "accept-admiralty-annotation", o.AcceptAdmiralty, "elect pods annotated multicluster.admiralty.io/elect too (turn off where Admiralty itself is installed)")
	fs.StringVar(&o.PodNetwork, "pod-network", o.PodNetwork, "isolated: a proxy's status.podIP stays empty and the delegate's IP is in the flotilla.dev/delegate-ip annotation; flat: status.podIP is the delegate's (cross-cluster pod network)")
	fs.IntVar(&o.ProxyWorkers, "proxy-workers", o.ProxyWorkers, "proxies reconciled in parallel")
	fs.DurationVar(&o.QuietStart, "quiet-start", o.QuietStart, "how long a delegate may simply start before its elected pod's status is written: one that runs within it costs one write (Running), one still Pending then shows Pending, its Events and the Delegated condition; trouble (an image that does not pull, Unschedulable) shows at once either way; 0 writes Pending and Delegated as soon as the delegate is seen")
	fs.IntVar(&o.ProxyWorkersPerCluster, "proxy-workers-per-cluster", o.ProxyWorkersPerCluster, "of --proxy-workers, how many may work on one secondary at once, so that one that answers slowly (or not at all until its probes say so) cannot take the workers the others need (default: half of --proxy-workers)")
	fs.DurationVar(&o.DependencyGrace, "dependency-grace", o.DependencyGrace, "how long a copied ConfigMap, Secret, Service or NetworkPolicy stays in a secondary after the last delegate there stopped using it")
	fs.DurationVar(&o.NamespaceCleanupInterval, "namespace-cleanup-interval", o.NamespaceCleanupInterval, "how often the namespaces Flotilla created in secondaries are looked at: one whose primary namespace is gone, or empty for --dependency-grace, is deleted (a primary namespace's deletion starts a pass at once)")
	fs.BoolVar(&o.RebalanceOnReturn, "rebalance-on-return", o.RebalanceOnReturn, "move elected pods back to a secondary that returned from a failover, once it has been Ready for --rebalance-after: one pod of a controller at a time, evicted through the Eviction API (PodDisruptionBudgets hold), until each controller's split is what placement would choose now")
	fs.BoolVar(&o.TenancyDefaultDeny, "tenancy-default-deny", o.TenancyDefaultDeny, "a namespace bound to no ClusterSet (no ClusterSetBinding) may use no secondary: its elected pods wait, saying so; off, such a namespace may use every secondary")
	fs.DurationVar(&o.RebalanceAfter, "rebalance-after", o.RebalanceAfter, "how long a secondary back from a failover stays Ready before --rebalance-on-return moves pods back to it")
	fs.DurationVar(&o.RebalanceInterval, "rebalance-interval", o.RebalanceInterval, "how often --rebalance-on-return runs a round; each evicts at most one pod per controller (10 in all), so a controller's pods move back one per round")
	fs.DurationVar(&o.SweepInterval, "sweep-interval", o.SweepInterval, "how often delegates whose proxy is gone are swept (only in secondaries Running for that long)")
}

func addReplicatorFlags(fs *pflag.FlagSet, o *setup.ReplicatorOptions) {
	fs.DurationVar(&o.Resync, "replicator-resync-interval", o.Resync, "how often a synced Replicator is applied again where something changed (drift is seen at once through watches; an unchanged object costs no write)")
	fs.DurationVar(&o.Retry, "replicator-retry-interval", o.Retry, "how soon a Replicator not synced in every cluster is tried again")
	fs.DurationVar(&o.Timeout, "replication-timeout", o.Timeout, "how long a Replicator's work in one cluster may take: a dead or slow cluster is reported, the others go on")
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "uninstall" {
		os.Exit(runUninstall(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		os.Exit(runAgent(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "lender" {
		os.Exit(runLender(os.Args[2:]))
	}
	opts := newOptions()
	fs := pflag.NewFlagSet("flotilla-manager", pflag.ContinueOnError)
	opts.addFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "flotilla-manager runs Flotilla in the primary cluster.\n\nUsage:\n  flotilla-manager [flags]\n  flotilla-manager uninstall --help   (what the chart's pre-delete hook runs)\n  flotilla-manager agent --help       (a secondary's agent in pull mode: its tunnel to the manager)\n  flotilla-manager lender --help      (a secondary's lender: holds each primary to its PrimaryAllowance)\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	opts.applyNamePrefix(fs)
	if opts.showVersion {
		fmt.Println("flotilla-manager", version.Get())
		return
	}
	handler, err := logging.NewHandler(opts.logging, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-manager:", err)
		os.Exit(2)
	}
	log := logr.FromSlogHandler(handler)
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	vklog.L = vkslog.FromSlog(slog.New(handler))
	if err := run(ctrl.SetupSignalHandler(), opts); err != nil {
		setupLog.Error(err, "Manager stopped")
		os.Exit(1)
	}
}

// applyNamePrefix names the manager's objects from --name-prefix; an explicit --leader-election-id
// or --webhook-service still wins.
func (o *options) applyNamePrefix(fs *pflag.FlagSet) {
	names := flotillav1.NamesFrom(o.namePrefix)
	names.Prefix = o.namePrefix // validated by setup: "" is refused there, not silently defaulted
	o.manager.Names = names
	if !fs.Changed("leader-election-id") {
		o.manager.LeaderElection.ID = names.ManagerLease
	}
	if !fs.Changed("webhook-service") {
		o.manager.Webhook.Service = names.WebhookService
	}
}

func run(ctx context.Context, opts options) error {
	setupLog.Info("Starting", "version", version.Get().String())
	if err := applySoftMemoryLimit(opts.containerMemoryLimit); err != nil {
		return err
	}
	cfg, err := restConfig(opts.kubeconfig, opts.kubecontext)
	if err != nil {
		return err
	}
	mgr, err := setup.New(ctx, cfg, opts.manager, ctrl.Log)
	if err != nil {
		return err
	}
	setupLog.Info("Starting manager", "host", cfg.Host, "leaderElection", opts.manager.LeaderElection.Enabled)
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
