package setup

import (
	"golang.org/x/time/rate"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/controllers/inventory"
	"github.com/flotilla-dev/flotilla/pkg/controllers/override"
	"github.com/flotilla-dev/flotilla/pkg/mcs"

	"k8s.io/apimachinery/pkg/api/meta"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	mcscontroller "github.com/flotilla-dev/flotilla/pkg/controllers/mcs"

	"context"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/flotilla-dev/flotilla/internal/apicalls"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/controllers/agentcredential"
	"github.com/flotilla-dev/flotilla/pkg/controllers/clusterdetector"
	"github.com/flotilla-dev/flotilla/pkg/controllers/clusterset"
	"github.com/flotilla-dev/flotilla/pkg/controllers/quota"
	"github.com/flotilla-dev/flotilla/pkg/controllers/registration"
	"github.com/flotilla-dev/flotilla/pkg/controllers/replicator"
	"github.com/flotilla-dev/flotilla/pkg/kubeletapi"
	"github.com/flotilla-dev/flotilla/pkg/seal"
	"github.com/flotilla-dev/flotilla/pkg/tracing"
	"github.com/flotilla-dev/flotilla/pkg/virtualnode"
)

// addClusters adds the cluster registry and what is fed by it or reads it first: the
// registration, ClusterDetector and Replicator reconcilers, the virtual nodes and their kubelet
// API, and the registry's readiness check.
func addClusters(ctx context.Context, mgr ctrl.Manager, opts Options, tp *tracing.Provider, log logr.Logger) (*clusters.Registry, error) {
	primaryClient, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("building the primary's client: %w", err)
	}
	primary, err := clusters.ReadPrimary(ctx, mgr.GetAPIReader(), primaryClient.Discovery())
	if err != nil {
		return nil, err
	}
	log.WithName("setup").Info("Primary identified", "primaryID", primary.ID, "version", primary.Version, "knownClusters", len(primary.KnownIDs))

	tunnels, err := addTunnel(mgr, primaryClient, opts.Clusters, log.WithName("tunnel"))
	if err != nil {
		return nil, err
	}
	registryOpts := clusters.Options{
		PrimaryID: primary.ID, KnownIDs: primary.KnownIDs,
		ProbeInterval: opts.Clusters.ProbeInterval, ProbeTimeout: opts.Clusters.ProbeTimeout,
		TokenRenewer: clusters.SecretTokenRenewer(mgr.GetClient()), RenewalFraction: opts.Clusters.TokenRenewalFraction,
		Elected: mgr.Elected(), Clock: opts.Clock, WrapTransport: wrapTransport(tp),
	}
	if tunnels != nil {
		registryOpts.Tunnels = tunnels
	}
	registry := clusters.NewRegistry(registryOpts, log.WithName("clusters"))
	if err := mgr.Add(registry); err != nil {
		return nil, fmt.Errorf("adding the cluster registry: %w", err)
	}
	if err := addClusterControllers(ctx, mgr, registry, primary.Version, opts, tp); err != nil {
		return nil, err
	}
	if tunnels != nil {
		if err := (&agentcredential.Reconciler{Registry: registry, Tokens: primaryClient.CoreV1().ServiceAccounts(flotillav1.SystemNamespace),
			Primary: mgr.GetClient(), Lifetime: opts.Clusters.AgentCredentialLifetime, Fraction: opts.Clusters.TokenRenewalFraction,
			Recorder: mgr.GetEventRecorder(eventSource), Clock: opts.Clock}).
			SetupWithManager(ctx, mgr, agentCredentialOptions()); err != nil {
			return nil, fmt.Errorf("setting up the agent credential controller: %w", err)
		}
	}
	first, count := opts.VirtualNodes.kubeletPorts()
	nodes := virtualnode.NewManager(registry, primaryClient, virtualnode.Options{
		NodeOptions:   virtualnode.NodeOptions{Address: opts.VirtualNodes.nodeAddress(), PrimaryVersion: primary.Version},
		KubeletPorts:  virtualnode.PortRange{First: first, Count: count},
		FailoverAfter: opts.VirtualNodes.FailoverAfter, Clock: opts.Clock,
	}, log.WithName("virtualnode"))
	if err := mgr.Add(nodes); err != nil {
		return nil, fmt.Errorf("adding the virtual nodes: %w", err)
	}
	if err := addKubeletAPI(ctx, mgr, registry, opts.VirtualNodes, log); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("clusters", func(*http.Request) error { return registry.Ready() }); err != nil {
		return nil, fmt.Errorf("adding the clusters readiness check: %w", err)
	}
	return registry, nil
}

// wrapTransport is the secondaries' transport wrapper: requests counted (flotilla_api_requests_total),
// and traced when tracing is on.
func wrapTransport(tp *tracing.Provider) func(http.RoundTripper) http.RoundTripper {
	count := apicalls.Wrap(apicalls.Secondary)
	return func(rt http.RoundTripper) http.RoundTripper { return tp.WrapTransport(count(rt)) }
}

// addClusterControllers sets up the registration, ClusterDetector and Replicator reconcilers.
func addClusterControllers(ctx context.Context, mgr ctrl.Manager, registry *clusters.Registry, primaryVersion string, opts Options, tp *tracing.Provider) error {
	recorder := mgr.GetEventRecorder(eventSource)
	if err := (&registration.Reconciler{Client: mgr.GetClient(), Registry: registry, Recorder: recorder}).
		SetupWithManager(ctx, mgr, registrationOptions()); err != nil {
		return fmt.Errorf("setting up the registration controller: %w", err)
	}
	if err := (&clusterdetector.Reconciler{Client: mgr.GetClient(), Registry: registry,
		PrimaryName: opts.Clusters.PrimaryName, PrimaryVersion: primaryVersion, Recorder: recorder}).
		SetupWithManager(ctx, mgr, clusterDetectorOptions()); err != nil {
		return fmt.Errorf("setting up the ClusterDetector controller: %w", err)
	}
	overridesServed, err := served(mgr, "Override")
	if err != nil {
		return err
	}
	if err := (&replicator.Reconciler{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Registry: registry,
		Tenancy: newGatherer(mgr, registry, opts), Recorder: recorder, Tracer: tp.Tracer(), WatchOverrides: overridesServed,
		Timeout: opts.Replicator.Timeout, Resync: opts.Replicator.Resync, Retry: opts.Replicator.Retry}).
		SetupWithManager(ctx, mgr, replicatorOptions()); err != nil {
		return fmt.Errorf("setting up the Replicator controller: %w", err)
	}
	if err := addClusterSets(ctx, mgr, registry, opts); err != nil {
		return err
	}
	if err := addOverrides(ctx, mgr, overridesServed); err != nil {
		return err
	}
	// Whether each Replicator is synced, computed from the cache at each scrape (on the leader).
	if err := mgr.Add(&replicator.SyncMetrics{Reader: mgr.GetClient()}); err != nil {
		return fmt.Errorf("adding the Replicator metrics: %w", err)
	}
	if err := (&inventory.Reconciler{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Registry: registry, PrimaryName: opts.Clusters.PrimaryName,
		Namespace: flotillav1.SystemNamespace, ConsumerNamespaces: opts.Clusters.InventoryNamespaces, Recorder: recorder, Clock: opts.Clock}).
		SetupWithManager(ctx, mgr, inventoryOptions()); err != nil {
		return fmt.Errorf("setting up the inventory controller: %w", err)
	}
	return addMulticlusterServices(ctx, mgr, registry, opts)
}

// addMulticlusterServices sets up the MCS controller when it is on and the primary serves the
// MCS API; without its CRDs the manager says so and runs without it.
func addMulticlusterServices(ctx context.Context, mgr ctrl.Manager, registry *clusters.Registry, opts Options) error {
	if !opts.Clusters.MulticlusterServices {
		return nil
	}
	if _, err := mgr.GetRESTMapper().RESTMapping(mcs.ServiceExports.GroupKind(), mcsv1beta1.SchemeGroupVersion.Version); err != nil {
		if meta.IsNoMatchError(err) {
			mgr.GetLogger().Info("Multi-Cluster Services are off: the primary does not serve multicluster.x-k8s.io/v1beta1 ServiceExports (install the chart with mcs.installCRDs=true, or the MCS API's CRDs)")
			return nil
		}
		return fmt.Errorf("looking up the MCS API in the primary: %w", err)
	}
	watchTenancy, err := served(mgr, "ClusterSetBinding")
	if err != nil {
		return err
	}
	if err := (&mcscontroller.Reconciler{Client: mgr.GetClient(), Registry: registry, PrimaryName: opts.Clusters.PrimaryName,
		Tenancy: newGatherer(mgr, registry, opts), WatchTenancy: watchTenancy,
		FailoverAfter: opts.VirtualNodes.FailoverAfter, Recorder: mgr.GetEventRecorder(eventSource), Clock: opts.Clock,
		Applies: rate.NewLimiter(mcsApplies, 2*mcsApplies)}).
		SetupWithManager(ctx, mgr, mcsOptions()); err != nil {
		return fmt.Errorf("setting up the Multi-Cluster Services controller: %w", err)
	}
	return nil
}

// addClusterSets adds the ClusterSets' status writer, where the primary serves them.
func addClusterSets(ctx context.Context, mgr ctrl.Manager, registry *clusters.Registry, opts Options) error {
	if served, err := served(mgr, "ClusterSet"); err != nil || !served {
		return err
	}
	if err := (&clusterset.Reconciler{Client: mgr.GetClient(), Views: newGatherer(mgr, registry, opts)}).
		SetupWithManager(ctx, mgr, registry, clusterSetOptions()); err != nil {
		return fmt.Errorf("setting up the ClusterSet controller: %w", err)
	}
	return nil
}

// addOverrides adds the Overrides' and ClusterOverrides' status writers, where the primary serves
// them.
func addOverrides(ctx context.Context, mgr ctrl.Manager, served bool) error {
	if !served {
		return nil
	}
	for _, cluster := range []bool{false, true} {
		if err := (&override.Reconciler{Client: mgr.GetClient(), Cluster: cluster}).
			SetupWithManager(ctx, mgr, overrideOptions()); err != nil {
			return fmt.Errorf("setting up the override status controller: %w", err)
		}
	}
	return nil
}

// addFleetQuotas adds the controller that admits elected pods to their namespace's FleetQuotas,
// where the primary serves them.
func addFleetQuotas(ctx context.Context, mgr ctrl.Manager, key seal.Key) error {
	if served, err := served(mgr, "FleetQuota"); err != nil || !served {
		return err
	}
	if err := (&quota.Reconciler{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), SealKey: key, Recorder: mgr.GetEventRecorder(eventSource)}).
		SetupWithManager(ctx, mgr, fleetQuotaOptions()); err != nil {
		return fmt.Errorf("setting up the FleetQuota controller: %w", err)
	}
	if err := mgr.Add(&quota.Metrics{Reader: mgr.GetClient()}); err != nil {
		return fmt.Errorf("adding the FleetQuota metrics: %w", err)
	}
	return nil
}

// served says whether the primary serves a kind of Flotilla's API (an install whose CRDs were
// not upgraded may not).
func served(mgr ctrl.Manager, kind string) (bool, error) {
	gk := flotillav1.GroupVersion.WithKind(kind).GroupKind()
	switch _, err := mgr.GetRESTMapper().RESTMapping(gk, flotillav1.GroupVersion.Version); {
	case meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("looking up %ss in the primary: %w", kind, err)
	}
	return true, nil
}

// mcsApplies is how many objects a second Multi-Cluster Services applies, in all clusters.
const mcsApplies = 50

// addKubeletAPI adds the virtual nodes' kubelet API, unless its port is 0: on every replica, a
// port per virtual node as its Node advertises it (the manager's cache of virtual nodes, whose
// changes it is told at once).
func addKubeletAPI(ctx context.Context, mgr ctrl.Manager, registry *clusters.Registry, opts VirtualNodeOptions, log logr.Logger) error {
	first, count := opts.kubeletPorts()
	if count == 0 {
		return nil
	}
	// Its own client and rate limiter: its callers must never spend the budget of the virtual
	// nodes' client, which renews their Leases.
	kubeletClient, err := kubeletapi.NewPrimaryClient(mgr.GetConfig())
	if err != nil {
		return err
	}
	kubelet := &kubeletapi.Server{Primary: kubeletClient, Secondaries: registry, Nodes: mgr.GetClient(),
		Ports: kubeletapi.PortRange{First: first, Count: count}, Address: opts.nodeAddress(),
		Recorder: mgr.GetEventRecorder(eventSource), Log: log.WithName("kubelet")}
	nodeInformer, err := mgr.GetCache().GetInformer(ctx, &corev1.Node{})
	if err != nil {
		return fmt.Errorf("watching virtual nodes: %w", err)
	}
	changed := func() { kubelet.NodesChanged() }
	if _, err := nodeInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { changed() }, UpdateFunc: func(any, any) { changed() }, DeleteFunc: func(any) { changed() },
	}); err != nil {
		return fmt.Errorf("watching virtual nodes: %w", err)
	}
	if err := mgr.Add(kubelet); err != nil {
		return fmt.Errorf("adding the kubelet API: %w", err)
	}
	return nil
}
