package setup

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/flotilla-dev/flotilla/internal/eventwriter"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/clusters/views"
	"github.com/flotilla-dev/flotilla/pkg/controllers/dependency"
	"github.com/flotilla-dev/flotilla/pkg/controllers/namespace"
	"github.com/flotilla-dev/flotilla/pkg/controllers/proxy"
	"github.com/flotilla-dev/flotilla/pkg/controllers/rebalance"
	"github.com/flotilla-dev/flotilla/pkg/controllers/volume"
	"github.com/flotilla-dev/flotilla/pkg/copies"
	"github.com/flotilla-dev/flotilla/pkg/election"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/seal"
	"github.com/flotilla-dev/flotilla/pkg/tracing"
	"github.com/flotilla-dev/flotilla/webhook"
)

// addElection adds pod election: the webhook (certificates, configuration, handlers), the
// namespace cleanup, the sweep, and the dependency and proxy reconcilers.
func addElection(ctx context.Context, mgr ctrl.Manager, registry *clusters.Registry, opts Options, tp *tracing.Provider, log logr.Logger) error {
	// The manager's client reads from a cache that has not started: a direct client writes what
	// must exist before it does.
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return fmt.Errorf("building a client: %w", err)
	}
	// One gatherer of the clusters as placement judges them: the webhook, the proxy reconciler
	// (gated proxies), the rebalancer and the volume controller read the same views.
	gatherer := newGatherer(mgr, registry, opts)
	sealKey, err := addWebhook(ctx, mgr, direct, gatherer, opts, tp)
	if err != nil {
		return err
	}
	nsInformer, err := mgr.GetCache().GetInformer(ctx, &corev1.Namespace{})
	if err != nil {
		return fmt.Errorf("watching the primary's namespaces: %w", err)
	}
	if err := mgr.Add(&namespace.Cleanup{Primary: mgr.GetClient(), Informer: nsInformer, Registry: registry,
		Interval: opts.Election.NamespaceCleanupInterval, Grace: opts.Election.DependencyGrace,
		Log: log.WithName("namespace-cleanup")}); err != nil {
		return fmt.Errorf("adding the namespace cleanup: %w", err)
	}
	if err := mgr.Add(&proxy.Sweeper{Proxies: mgr.GetClient(), Registry: registry, Interval: opts.Election.SweepInterval,
		Log: log.WithName("sweep"), Clock: opts.Clock}); err != nil {
		return fmt.Errorf("adding the sweep: %w", err)
	}
	if err := mgr.Add(&proxy.Strays{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(), Registry: registry,
		Recorder: mgr.GetEventRecorder(eventSource), Interval: opts.Election.SweepInterval, Log: log.WithName("strays")}); err != nil {
		return fmt.Errorf("adding the stray pods' handler: %w", err)
	}
	// The proxies per cluster and phase, computed from the cache at each scrape (on the leader).
	if err := mgr.Add(&proxy.Metrics{Reader: mgr.GetClient(), Clock: opts.Clock}); err != nil {
		return fmt.Errorf("adding the proxy metrics: %w", err)
	}
	meta, err := metadata.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("creating the metadata client: %w", err)
	}
	dependencies := dependency.NewMetadataWatch(meta)
	if err := (&dependency.Reconciler{Cache: mgr.GetClient(), Primary: mgr.GetAPIReader(), Secondaries: registry,
		Metadata: dependencies, Grace: opts.Election.DependencyGrace, Clock: opts.Clock}).
		SetupWithManager(ctx, mgr, dependencyOptions()); err != nil {
		return fmt.Errorf("setting up the dependency sync: %w", err)
	}
	if err := (&volume.Reconciler{Client: mgr.GetClient(), Secondaries: registry, Recorder: mgr.GetEventRecorder(eventSource), SealKey: sealKey, Views: gatherer}).
		SetupWithManager(ctx, mgr, controller.Options{}); err != nil {
		return fmt.Errorf("setting up the volume controller: %w", err)
	}
	// A delegate's creation is said once per proxy: written without the recorder's 6-minute cache.
	eventsClient, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("creating the Events client: %w", err)
	}
	hostname, _ := os.Hostname()
	proxyEvents := eventwriter.New(mgr.GetEventRecorder(eventSource), eventsClient.EventsV1(), mgr.GetScheme(), eventSource,
		eventSource+"-"+hostname, log.WithName("events"), flotillav1.ReasonDelegateCreated)
	if err := mgr.Add(proxyEvents); err != nil {
		return fmt.Errorf("adding the Event writer: %w", err)
	}
	if err := (&proxy.Reconciler{Client: mgr.GetClient(), Secondaries: registry, Recorder: proxyEvents,
		FlatNetwork: opts.Election.PodNetwork == PodNetworkFlat, SealKey: sealKey, Views: gatherer,
		Reflector:    &copies.Reflector{Primary: mgr.GetAPIReader(), PrimaryID: registry.PrimaryID()},
		Workloads:    mgr.GetAPIReader(),
		Dependencies: dependencies.WaitingProxies(mgr.GetClient()),
		PerCluster:   opts.Election.proxyWorkersPerCluster(), QuietStart: opts.Election.QuietStart, Clock: opts.Clock, Tracer: tp.Tracer(),
	}).SetupWithManager(ctx, mgr, proxyOptions(opts.Election)); err != nil {
		return fmt.Errorf("setting up the proxy controller: %w", err)
	}
	if err := addFleetQuotas(ctx, mgr, sealKey); err != nil {
		return err
	}
	if opts.Election.RebalanceOnReturn {
		if err := mgr.Add(&rebalance.Rebalancer{Client: mgr.GetClient(), Views: gatherer, After: opts.Election.RebalanceAfter,
			Interval: opts.Election.RebalanceInterval, PerRound: rebalancePerRound, Recorder: mgr.GetEventRecorder(eventSource),
			Log: log.WithName("rebalance"), Clock: opts.Clock}); err != nil {
			return fmt.Errorf("adding the rebalancer: %w", err)
		}
	}
	return nil
}

// newGatherer is the gatherer of the clusters as placement judges them, tenancy included; it
// keeps no state, so each feature that reads it may have its own.
func newGatherer(mgr ctrl.Manager, registry *clusters.Registry, opts Options) *views.Gatherer {
	return &views.Gatherer{Registry: registry, VirtualNodes: mgr.GetClient(), Clock: opts.Clock,
		Tenancy: mgr.GetClient(), DefaultDeny: opts.Election.TenancyDefaultDeny}
}

// addWebhook writes the webhook's certificate and configuration, reads (or makes) the admission
// seal's key, and registers the pod, DaemonSet and Replicator handlers. It returns the seal's key.
func addWebhook(ctx context.Context, mgr ctrl.Manager, direct client.Client, gatherer *views.Gatherer, opts Options, tp *tracing.Provider) (seal.Key, error) {
	if err := addCertificates(ctx, mgr, direct, opts); err != nil {
		return nil, err
	}
	sealKey, err := ensureSealKey(ctx, direct, opts.Names.SealSecret)
	if err != nil {
		return nil, err
	}
	var choose func([]int64) int
	if opts.Election.ProxyPlacement == ProxyPlacementWebhook {
		choose = placement.WeightedRandom
	}
	// On every replica (each serves the webhook): the book's handler also starts the proxy
	// informer there.
	proxies := &webhook.ProxyBook{}
	proxyInformer, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("watching proxies: %w", err)
	}
	if _, err := proxyInformer.AddEventHandler(proxies); err != nil {
		return nil, fmt.Errorf("watching proxies: %w", err)
	}
	if _, err := mgr.GetCache().GetInformer(ctx, &corev1.Node{}); err != nil {
		return nil, fmt.Errorf("watching virtual nodes: %w", err)
	}
	// Claims and their volumes are read from the cache on every replica (the volume controller,
	// which also reads them, runs on the leader only).
	for _, o := range []client.Object{&corev1.PersistentVolumeClaim{}, &corev1.PersistentVolume{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, o); err != nil {
			return nil, fmt.Errorf("watching %T: %w", o, err)
		}
	}
	decoder := admission.NewDecoder(mgr.GetScheme())
	podHandler := &webhook.Handler{
		Views: gatherer, Options: election.Options{AcceptAdmiralty: opts.Election.AcceptAdmiralty, Choose: choose},
		Spread:  &webhook.Spread{Proxies: proxies, Replica: replicaName(opts.Clock)},
		Decoder: decoder, Namespaces: mgr.GetClient(), LiveNamespaces: mgr.GetAPIReader(),
		Claims: mgr.GetClient(), LiveClaims: mgr.GetAPIReader(), LiveReads: rate.NewLimiter(liveClaimReads, 2*liveClaimReads),
		Quotas: mgr.GetClient(), Proxies: mgr.GetClient(),
		SealKey: sealKey,
	}
	server := mgr.GetWebhookServer()
	// With --webhook-client-names, only the API server is served.
	callers := func(h http.Handler) http.Handler { return h }
	if names := opts.Webhook.ClientNames; len(names) > 0 {
		callers = func(h http.Handler) http.Handler { return webhook.FromAPIServer(names, h) }
	}
	server.Register(webhook.Path, callers(tp.Handler(&admission.Webhook{Handler: podHandler}, "admission pods")))
	server.Register(webhook.DaemonSetPath, callers(&admission.Webhook{Handler: &webhook.DaemonSetHandler{Decoder: decoder}}))
	// A Replicator is admitted only when its author may write what it will write (one
	// SubjectAccessReview per right); the namespace is read live, a cached miss would ask too much.
	server.Register(webhook.ReplicatorPath, callers(&admission.Webhook{Handler: &webhook.ReplicatorHandler{
		Decoder: decoder, Reviews: direct, Namespaces: mgr.GetAPIReader(), Mapper: mgr.GetRESTMapper(), Clusters: gatherer.Registry, Tenancy: gatherer}}))
	// An Override is admitted only when its author may write what it changes, and it adds nothing
	// the fence keeps out of secondaries.
	server.Register(webhook.OverridePath, callers(&admission.Webhook{Handler: &webhook.OverrideHandler{Decoder: decoder, Reviews: direct, Mapper: mgr.GetRESTMapper()}}))
	if err := mgr.AddReadyzCheck("webhook", server.StartedChecker()); err != nil {
		return nil, fmt.Errorf("adding the webhook readiness check: %w", err)
	}
	return sealKey, nil
}

// liveClaimReads is how many claims or volumes per second the pod webhook reads from the API
// server, across every admission, when the cache has not seen them yet.
const liveClaimReads = 10

// addCertificates writes the webhook's serving certificate and configuration now (the webhook
// server needs the files when it starts) and adds their renewal.
func addCertificates(ctx context.Context, mgr ctrl.Manager, direct client.Client, opts Options) error {
	// One serving certificate for the webhook's Service and the metrics' (the metrics server reads
	// the same files): a scraper verifies it with the CA published in opts.Names.CAConfigMap.
	dnsNames := []string{"localhost"}
	for _, svc := range []string{opts.Webhook.Service, opts.Names.MetricsService} {
		name := svc + "." + flotillav1.SystemNamespace + ".svc"
		dnsNames = append(dnsNames, name, name+".cluster.local")
	}
	certs := &webhook.Certificates{
		Client: direct, CertDir: opts.Webhook.CertDir, SecretName: opts.Names.WebhookCASecret, CAConfigMapName: opts.Names.CAConfigMap,
		DNSNames: dnsNames,
		IPs:      []net.IP{net.ParseIP("127.0.0.1")},
		Config: webhook.ConfigOptions{Name: opts.Names.WebhookConfiguration, URL: opts.Webhook.URL, Service: opts.Webhook.Service, Namespace: flotillav1.SystemNamespace,
			AcceptAdmiralty: opts.Election.AcceptAdmiralty, CAInjectedFrom: opts.Webhook.CAInjectedFrom},
		Clock: opts.Clock,
	}
	if err := certs.Ensure(ctx); err != nil {
		return fmt.Errorf("setting up the webhook's certificates: %w", err)
	}
	if err := mgr.Add(certs); err != nil {
		return fmt.Errorf("adding the certificate renewal: %w", err)
	}
	return nil
}

// replicaName names this manager replica: its pod (hostname) in cluster, plus the process ID and
// start time, so that a restarted replica is another one.
func replicaName(c clock.PassiveClock) string {
	if c == nil {
		c = clock.RealClock{}
	}
	host, err := os.Hostname()
	if err != nil {
		host = "manager"
	}
	return fmt.Sprintf("%s-%d-%d", host, os.Getpid(), c.Now().Unix())
}

// eventSource is the reporting controller of Flotilla's Events.
const eventSource = "flotilla"

// rebalancePerRound bounds the evictions of one rebalancer round (--rebalance-interval paces the
// rounds), besides its one pod per controller.
const rebalancePerRound = 10
