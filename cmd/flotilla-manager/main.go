// Command flotilla-manager runs Flotilla in the primary cluster: the admission webhook, one virtual
// node per secondary and the controllers, in one process with leader election. It runs in cluster
// (its ServiceAccount) or out of cluster with --kubeconfig.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	vklogrus "github.com/virtual-kubelet/virtual-kubelet/log/logrus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/controllers/clusterdetector"
	"github.com/flotilla-dev/flotilla/pkg/controllers/dependency"
	"github.com/flotilla-dev/flotilla/pkg/controllers/namespace"
	"github.com/flotilla-dev/flotilla/pkg/controllers/proxy"
	"github.com/flotilla-dev/flotilla/pkg/controllers/registration"
	"github.com/flotilla-dev/flotilla/pkg/controllers/replicator"
	"github.com/flotilla-dev/flotilla/pkg/kubeletapi"
	"github.com/flotilla-dev/flotilla/pkg/logging"
	"github.com/flotilla-dev/flotilla/pkg/seal"
	"github.com/flotilla-dev/flotilla/pkg/version"
	"github.com/flotilla-dev/flotilla/pkg/virtualnode"
	"github.com/flotilla-dev/flotilla/webhook"
)

var (
	scheme   = runtime.NewScheme()
	setupLog = ctrl.Log.WithName("setup")
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(flotillav1.AddToScheme(scheme))
}

type options struct {
	kubeconfig               string
	kubecontext              string
	metricsAddr              string
	metricsSecure            bool
	probeAddr                string
	pprofAddr                string
	containerMemoryLimit     string
	leaderElect              bool
	leaderElectionNamespace  string
	leaderElectionID         string
	qps                      float32
	burst                    int
	showVersion              bool
	logging                  logging.Options
	primaryName              string
	probeInterval            time.Duration
	probeTimeout             time.Duration
	nodeAddress              string
	kubeletPort              int32
	renewalFraction          float64
	webhookPort              int
	webhookHost              string
	webhookURL               string
	webhookService           string
	webhookCertDir           string
	webhookCAInjectedFrom    string
	acceptAdmiralty          bool
	proxyPlacement           string
	podNetwork               string
	proxyWorkers             int
	proxyWorkersPerCluster   int
	failoverAfter            time.Duration
	sweepInterval            time.Duration
	namespaceCleanupInterval time.Duration
	dependencyGrace          time.Duration
	replicationTimeout       time.Duration
	replicatorResync         time.Duration
	replicatorRetry          time.Duration
	leaseDuration            time.Duration
	renewDeadline            time.Duration
	retryPeriod              time.Duration
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the primary cluster; empty: in-cluster config, else $KUBECONFIG or ~/.kube/config")
	fs.StringVar(&o.kubecontext, "context", "", "context of --kubeconfig to use (default: its current context)")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "address of the Prometheus metrics endpoint; \"0\" turns it off")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS, authenticated (TokenReview) and authorised (SubjectAccessReview on /metrics)")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.StringVar(&o.containerMemoryLimit, "container-memory-limit", os.Getenv("FLOTILLA_CONTAINER_MEMORY_LIMIT"), "the container's memory limit (bytes or a quantity such as 512Mi; the chart passes limits.memory through the downward API, $FLOTILLA_CONTAINER_MEMORY_LIMIT): Go's soft memory limit is set to 90% of it, so the heap is collected before it reaches the limit (GOMEMLIMIT, when set, wins)")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "address of Go's /debug/pprof profiles, unauthenticated: bind it to 127.0.0.1 (default: off)")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader among replicas, so one runs the controllers at a time")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "flotilla-system", "namespace of the leader election Lease (in cluster: the pod's namespace when empty)")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", flotillav1.ManagerLeaseName, "name of the leader election Lease")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits, after the leader's last renewal, before it takes the lead: the time without a leader after the leader dies without releasing its Lease")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew its Lease before it gives up the lead and exits (less than --leader-elect-lease-duration)")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "time between two tries to take or renew the Lease")
	fs.Float32Var(&o.qps, "kube-api-qps", 500, "queries per second to the primary's API server (client-go's default of 5 would throttle Flotilla)")
	fs.IntVar(&o.burst, "kube-api-burst", 1000, "burst of queries to the primary's API server")
	fs.StringVar(&o.primaryName, "primary-name", "primary", "name of the primary's ClusterDetector")
	fs.DurationVar(&o.probeInterval, "probe-interval", 2*time.Second, "time between two health probes of a registered cluster")
	fs.DurationVar(&o.probeTimeout, "probe-timeout", 2*time.Second, "how long a cluster may take to answer a health probe before it counts as failed")
	fs.StringVar(&o.nodeAddress, "node-address", os.Getenv("POD_IP"), "InternalIP the virtual nodes advertise (default $POD_IP, else 127.0.0.1)")
	fs.Int32Var(&o.kubeletPort, "kubelet-port", 10250, "port of the virtual nodes' kubelet API (kubectl logs/exec on proxies), advertised on each node; 0 turns it off")
	fs.Float64Var(&o.renewalFraction, "token-renewal-fraction", 0.5, "renew a registered ServiceAccount token once this fraction of its lifetime has passed")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "port of the admission webhook (TLS)")
	fs.StringVar(&o.webhookHost, "webhook-bind-host", "", "address the webhook binds (default: all)")
	fs.StringVar(&o.webhookURL, "webhook-url", "", "URL the API server uses to reach the webhook, e.g. https://127.0.0.1:9443 when the manager runs out of cluster (default: the Service --webhook-service)")
	fs.StringVar(&o.webhookService, "webhook-service", "flotilla-webhook", "Service of the webhook in the manager's namespace (in cluster)")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "", "where the webhook's serving certificate is written (default: a new temporary directory)")
	fs.StringVar(&o.webhookCAInjectedFrom, "webhook-ca-injected-from", "", "NAMESPACE/NAME of a cert-manager Certificate whose Secret is mounted at --webhook-cert-dir: the manager issues no certificate of its own and leaves the webhook configuration's caBundle to cert-manager's CA injector (the chart's webhook.certManager.enabled)")
	fs.StringVar(&o.proxyPlacement, "proxy-placement", "webhook", "who binds a proxy to one of its feasible virtual nodes: webhook (at admission: a controller's replicas spread over clusters, ties weighted by free CPU; no scheduling cycle or bind call per pod) or scheduler (the primary's kube-scheduler)")
	fs.BoolVar(&o.acceptAdmiralty, "accept-admiralty-annotation", true, "elect pods annotated multicluster.admiralty.io/elect too (turn off where Admiralty itself is installed)")
	fs.StringVar(&o.podNetwork, "pod-network", "isolated", "isolated: a proxy's status.podIP stays empty and the delegate's IP is in the flotilla.dev/delegate-ip annotation; flat: status.podIP is the delegate's (cross-cluster pod network)")
	fs.IntVar(&o.proxyWorkers, "proxy-workers", 96, "proxies reconciled in parallel")
	fs.IntVar(&o.proxyWorkersPerCluster, "proxy-workers-per-cluster", 0, "of --proxy-workers, how many may work on one secondary at once, so that one that answers slowly (or not at all until its probes say so) cannot take the workers the others need (default: half of --proxy-workers)")
	fs.DurationVar(&o.replicatorResync, "replicator-resync-interval", replicator.DefaultResync, "how often a synced Replicator is applied again where something changed (drift is seen at once through watches; an unchanged object costs no write)")
	fs.DurationVar(&o.replicatorRetry, "replicator-retry-interval", replicator.DefaultRetry, "how soon a Replicator not synced in every cluster is tried again")
	fs.DurationVar(&o.replicationTimeout, "replication-timeout", 10*time.Second, "how long a Replicator's work in one cluster may take: a dead or slow cluster is reported, the others go on")
	fs.DurationVar(&o.dependencyGrace, "dependency-grace", time.Minute, "how long a copied ConfigMap, Secret, Service or NetworkPolicy stays in a secondary after the last delegate there stopped using it")
	fs.DurationVar(&o.namespaceCleanupInterval, "namespace-cleanup-interval", 5*time.Minute, "how often the namespaces Flotilla created in secondaries are looked at: one whose primary namespace is gone, or empty for --dependency-grace, is deleted (a primary namespace's deletion starts a pass at once)")
	fs.DurationVar(&o.sweepInterval, "sweep-interval", 30*time.Second, "how often delegates whose proxy is gone are swept (only in secondaries Running for that long)")
	fs.DurationVar(&o.failoverAfter, "failover-after", 30*time.Second, "how long a secondary stays Unknown before its virtual node is tainted flotilla.dev/unreachable:NoExecute (its proxies are then evicted after their flotilla.dev/failover-seconds)")
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	o.logging.AddFlags(fs)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "uninstall" {
		os.Exit(runUninstall(os.Args[2:]))
	}
	var opts options
	fs := pflag.NewFlagSet("flotilla-manager", pflag.ContinueOnError)
	opts.addFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "flotilla-manager runs Flotilla in the primary cluster.\n\nUsage:\n  flotilla-manager [flags]\n  flotilla-manager uninstall --help   (what the chart's pre-delete hook runs)\n\nFlags:\n%s", fs.FlagUsages())
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
	logger, err := logging.NewLogrus(opts.logging, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-manager:", err)
		os.Exit(2)
	}
	log, _ := logging.New(opts.logging, os.Stderr)
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	vklog.L = vklogrus.FromLogrus(logrus.NewEntry(logger))
	if err := run(ctrl.SetupSignalHandler(), opts); err != nil {
		setupLog.Error(err, "Manager stopped")
		os.Exit(1)
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
	cfg.QPS, cfg.Burst = opts.qps, opts.burst
	cfg.UserAgent = "flotilla-manager/" + version.Get().Version

	if opts.podNetwork != "isolated" && opts.podNetwork != "flat" {
		return fmt.Errorf("--pod-network %q: want isolated or flat", opts.podNetwork)
	}
	if opts.webhookCertDir == "" {
		dir, err := os.MkdirTemp("", "flotilla-webhook-")
		if err != nil {
			return fmt.Errorf("creating the webhook certificate directory: %w", err)
		}
		opts.webhookCertDir = dir
	}
	metricsOpts := metricsserver.Options{BindAddress: opts.metricsAddr, SecureServing: opts.metricsSecure}
	if opts.metricsSecure {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	// Secrets are read in flotilla-system only (the registration Secret); nothing else needs them.
	replicated, err := labels.Parse(flotillav1.LabelReplicator)
	if err != nil {
		return fmt.Errorf("parsing the replicated-object selector: %w", err)
	}
	cacheOpts := cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}:              {Namespaces: map[string]cache.Config{flotillav1.SystemNamespace: {}}},
		&flotillav1.ClusterDetector{}: {Namespaces: map[string]cache.Config{flotillav1.SystemNamespace: {}}},
		// Only proxies: the primary's other pods are none of Flotilla's business; proxies without
		// what Flotilla never reads back (proxy.SlimProxy). Nothing reads a virtual node's
		// managedFields (2.5 MB of the live heap at 1000 proxies).
		&corev1.Pod{}: {Label: labels.SelectorFromSet(labels.Set{flotillav1.LabelProxy: "true"}), Transform: proxy.SlimProxy},
		// Only virtual nodes (the webhook reads their cordon and taints).
		&corev1.Node{}: {Label: labels.SelectorFromSet(labels.Set{flotillav1.LabelNodeType: flotillav1.NodeTypeVirtualKubelet}),
			Transform: cache.TransformStripManagedFields()},
		// What Replicators applied (drift watches); a Deployment not Flotilla's is read uncached.
		// Every Ingress is cached: one whose backends select elected pods follows them.
		&appsv1.Deployment{}: {Label: replicated},
		&corev1.ConfigMap{}:  {Label: replicated},
	}}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache:  cacheOpts,
		WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{Host: opts.webhookHost, Port: opts.webhookPort,
			CertDir: opts.webhookCertDir}),
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        opts.probeAddr,
		PprofBindAddress:              opts.pprofAddr,
		LeaderElection:                opts.leaderElect,
		LeaderElectionID:              opts.leaderElectionID,
		LeaderElectionNamespace:       opts.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &opts.leaseDuration,
		RenewDeadline:                 &opts.renewDeadline,
		RetryPeriod:                   &opts.retryPeriod,
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
		// Well inside the kubelet's 1 s probe timeout: a probe that waits would fail anyway.
		cctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
		defer cancel()
		if !cache.WaitForCacheSync(cctx) {
			return errors.New("informers not synced")
		}
		return nil
	}); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}
	registry, err := setupClusters(ctx, mgr, cfg, opts)
	if err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("clusters", func(*http.Request) error { return registry.Ready() }); err != nil {
		return fmt.Errorf("adding the clusters readiness check: %w", err)
	}
	if err := setupElection(ctx, mgr, cfg, registry, opts); err != nil {
		return err
	}
	setupLog.Info("Starting manager", "host", cfg.Host, "leaderElection", opts.leaderElect)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
}

// setupClusters wires the cluster registry, the registration, ClusterDetector and Replicator
// reconcilers, the virtual nodes and their kubelet API.
func setupClusters(ctx context.Context, mgr ctrl.Manager, cfg *rest.Config, opts options) (*clusters.Registry, error) {
	primaryClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the primary's client: %w", err)
	}
	primary, err := clusters.ReadPrimary(ctx, mgr.GetAPIReader(), primaryClient.Discovery())
	if err != nil {
		return nil, err
	}
	setupLog.Info("Primary identified", "primaryID", primary.ID, "version", primary.Version, "knownClusters", len(primary.KnownIDs))

	registry := clusters.NewRegistry(clusters.Options{
		PrimaryID: primary.ID, KnownIDs: primary.KnownIDs, ProbeInterval: opts.probeInterval, ProbeTimeout: opts.probeTimeout,
		TokenRenewer: clusters.SecretTokenRenewer(mgr.GetClient()), RenewalFraction: opts.renewalFraction,
		Elected: mgr.Elected(),
	}, ctrl.Log.WithName("clusters"))
	if err := mgr.Add(registry); err != nil {
		return nil, fmt.Errorf("adding the cluster registry: %w", err)
	}
	recorder := mgr.GetEventRecorder("flotilla")
	if err := (&registration.Reconciler{Client: mgr.GetClient(), Registry: registry, Recorder: recorder}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the registration controller: %w", err)
	}
	if err := (&clusterdetector.Reconciler{Client: mgr.GetClient(), Registry: registry,
		PrimaryName: opts.primaryName, Recorder: recorder}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the ClusterDetector controller: %w", err)
	}
	if err := (&replicator.Reconciler{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Registry: registry,
		Recorder: recorder, Timeout: opts.replicationTimeout, Resync: opts.replicatorResync, Retry: opts.replicatorRetry}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the Replicator controller: %w", err)
	}
	address := opts.nodeAddress
	if address == "" {
		address = "127.0.0.1"
	}
	nodes := virtualnode.NewManager(registry, primaryClient, virtualnode.Options{NodeOptions: virtualnode.NodeOptions{
		Address: address, KubeletPort: opts.kubeletPort, PrimaryVersion: primary.Version,
	}, FailoverAfter: opts.failoverAfter}, ctrl.Log.WithName("virtualnode"))
	if err := mgr.Add(nodes); err != nil {
		return nil, fmt.Errorf("adding the virtual nodes: %w", err)
	}
	if opts.kubeletPort > 0 {
		// Its own client and rate limiter: its callers must never spend primaryClient's budget,
		// which renews the virtual nodes' Leases.
		kubeletClient, err := kubeletapi.NewPrimaryClient(cfg)
		if err != nil {
			return nil, err
		}
		kubelet := &kubeletapi.Server{Primary: kubeletClient, Secondaries: registry, Addr: fmt.Sprintf(":%d", opts.kubeletPort),
			ServingHosts: []string{"localhost"}, ServingIPs: []net.IP{net.ParseIP(address)}, Log: ctrl.Log.WithName("kubelet")}
		if err := mgr.Add(kubelet); err != nil {
			return nil, fmt.Errorf("adding the kubelet API: %w", err)
		}
	}
	return registry, nil
}

// setupElection wires pod election: the webhook (certificates, configuration, handler), the
// proxy reconciler, the sweep and the dependency reconciler.
func setupElection(ctx context.Context, mgr ctrl.Manager, cfg *rest.Config, registry *clusters.Registry, opts options) error {
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("building a client: %w", err)
	}
	certs := &webhook.Certificates{
		Client: direct, CertDir: opts.webhookCertDir, SecretName: flotillav1.WebhookCASecretName,
		DNSNames: []string{"localhost", opts.webhookService + "." + flotillav1.SystemNamespace + ".svc",
			opts.webhookService + "." + flotillav1.SystemNamespace + ".svc.cluster.local"},
		IPs: []net.IP{net.ParseIP("127.0.0.1")},
		Config: webhook.ConfigOptions{URL: opts.webhookURL, Service: opts.webhookService, Namespace: flotillav1.SystemNamespace,
			AcceptAdmiralty: opts.acceptAdmiralty, CAInjectedFrom: opts.webhookCAInjectedFrom},
	}
	// Before the webhook server starts: it needs the certificate files.
	if err := certs.Ensure(ctx); err != nil {
		return fmt.Errorf("setting up the webhook's certificates: %w", err)
	}
	if err := mgr.Add(certs); err != nil {
		return fmt.Errorf("adding the certificate renewal: %w", err)
	}
	sealKey, err := seal.Ensure(ctx, direct, flotillav1.SealSecretName)
	if err != nil {
		return err
	}
	var choose func([]int64) int
	switch opts.proxyPlacement {
	case "webhook":
		choose = webhook.WeightedRandom
	case "scheduler":
	default:
		return fmt.Errorf("--proxy-placement must be webhook or scheduler, not %q", opts.proxyPlacement)
	}
	// On every replica (each serves the webhook): the book's handler also starts the proxy
	// informer there.
	proxies := &webhook.ProxyBook{}
	proxyInformer, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return fmt.Errorf("watching proxies: %w", err)
	}
	if _, err := proxyInformer.AddEventHandler(proxies); err != nil {
		return fmt.Errorf("watching proxies: %w", err)
	}
	if _, err := mgr.GetCache().GetInformer(ctx, &corev1.Node{}); err != nil {
		return fmt.Errorf("watching virtual nodes: %w", err)
	}
	podHandler := &webhook.Handler{
		Registry: registry, Options: webhook.Options{AcceptAdmiralty: opts.acceptAdmiralty, Choose: choose},
		VirtualNodes: mgr.GetClient(),
		Spread:       &webhook.Spread{Proxies: proxies, Replica: replicaName()},
		Decoder:      admission.NewDecoder(mgr.GetScheme()), Namespaces: mgr.GetClient(), LiveNamespaces: mgr.GetAPIReader(),
		SealKey: sealKey,
	}
	mgr.GetWebhookServer().Register(webhook.Path, &admission.Webhook{Handler: podHandler})
	mgr.GetWebhookServer().Register(webhook.DaemonSetPath, &admission.Webhook{Handler: &webhook.DaemonSetHandler{
		Decoder: admission.NewDecoder(mgr.GetScheme())}})
	// A Replicator is admitted only when its author may write what it will write (one
	// SubjectAccessReview per right); the namespace is read live, a cached miss would ask too much.
	mgr.GetWebhookServer().Register(webhook.ReplicatorPath, &admission.Webhook{Handler: &webhook.ReplicatorHandler{
		Decoder: admission.NewDecoder(mgr.GetScheme()), Reviews: direct, Namespaces: mgr.GetAPIReader()}})
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return fmt.Errorf("adding the webhook readiness check: %w", err)
	}
	nsInformer, err := mgr.GetCache().GetInformer(ctx, &corev1.Namespace{})
	if err != nil {
		return fmt.Errorf("watching the primary's namespaces: %w", err)
	}
	if err := mgr.Add(&namespace.Cleanup{Primary: mgr.GetClient(), Informer: nsInformer, Registry: registry,
		Interval: opts.namespaceCleanupInterval, Grace: opts.dependencyGrace, Log: ctrl.Log.WithName("namespace-cleanup")}); err != nil {
		return fmt.Errorf("adding the namespace cleanup: %w", err)
	}
	sweeper := &proxy.Sweeper{Proxies: mgr.GetClient(), Registry: registry, Interval: opts.sweepInterval, Log: ctrl.Log.WithName("sweep")}
	if err := mgr.Add(sweeper); err != nil {
		return fmt.Errorf("adding the sweep: %w", err)
	}
	meta, err := metadata.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("creating the metadata client: %w", err)
	}
	dependencies := dependency.NewMetadataWatch(meta)
	if err := (&dependency.Reconciler{Cache: mgr.GetClient(), Primary: mgr.GetAPIReader(), Secondaries: registry,
		Grace: opts.dependencyGrace}).SetupWithManager(mgr, dependencies); err != nil {
		return fmt.Errorf("setting up the dependency sync: %w", err)
	}
	return (&proxy.Reconciler{Client: mgr.GetClient(), Secondaries: registry,
		Recorder: mgr.GetEventRecorder("flotilla"), FlatNetwork: opts.podNetwork == "flat", SealKey: sealKey, Refit: podHandler.Refit,
		Reflector:    &dependency.Reflector{Primary: mgr.GetAPIReader(), PrimaryID: registry.PrimaryID()},
		Dependencies: dependencies.WaitingProxies(mgr.GetClient()),
		PerCluster:   cmp.Or(opts.proxyWorkersPerCluster, max(1, opts.proxyWorkers/2)),
	}).SetupWithManager(ctx, mgr, opts.proxyWorkers)
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

// replicaName names this manager replica: its pod (hostname) in cluster, plus the process ID and
// start time, so that a restarted replica is another one.
func replicaName() string {
	host, err := os.Hostname()
	if err != nil {
		host = "manager"
	}
	return fmt.Sprintf("%s-%d-%d", host, os.Getpid(), time.Now().Unix())
}
