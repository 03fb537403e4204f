package setup

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/controllers/proxy"
	"github.com/flotilla-dev/flotilla/pkg/controllers/replicator"
	"github.com/flotilla-dev/flotilla/pkg/tracing"
	"github.com/flotilla-dev/flotilla/pkg/virtualnode"
)

// Values of ElectionOptions.ProxyPlacement and ElectionOptions.PodNetwork.
const (
	// ProxyPlacementWebhook binds a proxy at admission (a controller's replicas spread over
	// clusters, ties weighted by free CPU).
	ProxyPlacementWebhook = "webhook"
	// ProxyPlacementScheduler leaves the choice among the feasible virtual nodes to the primary's
	// kube-scheduler.
	ProxyPlacementScheduler = "scheduler"
	// PodNetworkIsolated leaves a proxy's status.podIP empty; the delegate's IP is in the
	// flotilla.dev/delegate-ip annotation.
	PodNetworkIsolated = "isolated"
	// PodNetworkFlat reports the delegate's IP as the proxy's status.podIP (a cross-cluster pod
	// network).
	PodNetworkFlat = "flat"
)

// Options are every setting of the manager. Each field names the flag of cmd/flotilla-manager
// that sets it; DefaultOptions holds the defaults.
type Options struct {
	// Names are those of the manager's own objects, from --name-prefix (the chart's fullname).
	Names          flotillav1.InstallNames
	Manager        ManagerOptions
	LeaderElection LeaderElectionOptions
	Clusters       ClusterOptions
	VirtualNodes   VirtualNodeOptions
	Webhook        WebhookOptions
	Election       ElectionOptions
	Replicator     ReplicatorOptions
	Tracing        tracing.Options
	// Clock is given to the registry, the virtual nodes, the reconcilers and the sweep (nil: the
	// real one).
	Clock clock.PassiveClock
}

// ManagerOptions are the manager's endpoints and its clients of the primary.
type ManagerOptions struct {
	// MetricsBindAddress is the Prometheus endpoint's address; "0" turns it off
	// (--metrics-bind-address).
	MetricsBindAddress string
	// MetricsSecure serves metrics over HTTPS, authenticated (TokenReview) and authorised
	// (SubjectAccessReview on /metrics) (--metrics-secure).
	MetricsSecure bool
	// HealthProbeBindAddress serves /healthz and /readyz; "0" turns it off
	// (--health-probe-bind-address).
	HealthProbeBindAddress string
	// PprofBindAddress serves Go's /debug/pprof, unauthenticated; empty turns it off
	// (--pprof-bind-address).
	PprofBindAddress string
	// QPS and Burst of the manager's clients of the primary's API server (--kube-api-qps,
	// --kube-api-burst).
	QPS   float32
	Burst int
}

// LeaderElectionOptions elect one replica to run the controllers.
type LeaderElectionOptions struct {
	// Enabled elects a leader among replicas (--leader-elect).
	Enabled bool
	// Namespace of the Lease; in cluster, the pod's namespace when empty
	// (--leader-election-namespace).
	Namespace string
	// ID names the Lease (--leader-election-id).
	ID string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's leader election timings
	// (--leader-elect-lease-duration, --leader-elect-renew-deadline, --leader-elect-retry-period).
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// ClusterOptions configure the cluster registry and the ClusterDetectors.
type ClusterOptions struct {
	// PrimaryName names the primary's ClusterDetector (--primary-name).
	PrimaryName string
	// InventoryNamespaces are the namespaces of the inventory's readers (--inventory-namespaces):
	// each gets the secondaries' ClusterProfiles and, for those reached directly, the credential
	// Secret their access provider reads.
	InventoryNamespaces []string
	// ProbeInterval is the time between two health probes of a registered cluster
	// (--probe-interval).
	ProbeInterval time.Duration
	// ProbeTimeout is how long a probe may take before it counts as failed (--probe-timeout).
	ProbeTimeout time.Duration
	// TokenRenewalFraction of a registered ServiceAccount token's lifetime after which it is
	// renewed (--token-renewal-fraction).
	TokenRenewalFraction float64
	// MulticlusterServices runs the Multi-Cluster Services controller: ServiceExports of any
	// cluster imported in all (--multicluster-services). It runs only where the primary has
	// the MCS API's CRDs.
	MulticlusterServices bool
	// TunnelBindAddress is where the leader accepts the agents of secondaries in pull mode;
	// empty: no tunnel, and a cluster registered in pull mode is InvalidContext
	// (--tunnel-bind-address).
	TunnelBindAddress string
	// TunnelCertDir holds the tunnel endpoint's serving certificate, tls.crt and tls.key, read
	// again when they change (--tunnel-cert-dir).
	TunnelCertDir string
	// AgentCredentialLifetime is the life of the credentials the leader gives pulled
	// secondaries' agents, each replaced past TokenRenewalFraction of it
	// (--agent-credential-lifetime).
	AgentCredentialLifetime time.Duration
}

// VirtualNodeOptions configure the virtual nodes and their kubelet API.
type VirtualNodeOptions struct {
	// Address is the InternalIP the virtual nodes advertise; empty: 127.0.0.1 (--node-address).
	Address string
	// KubeletPort is the first port of the virtual nodes' kubelet APIs (kubectl logs/exec on
	// proxies, the API server's node proxy, metrics-server); 0 turns them off (--kubelet-port).
	KubeletPort int32
	// KubeletPortCount is how many ports from KubeletPort the virtual nodes are given, one each:
	// as many virtual nodes at most have a kubelet API (--kubelet-port-count).
	KubeletPortCount int32
	// FailoverAfter is how long a secondary stays Unknown before its virtual node is tainted
	// flotilla.dev/unreachable:NoExecute (--failover-after).
	FailoverAfter time.Duration
}

// WebhookOptions configure the admission webhook's server, certificate and configuration.
type WebhookOptions struct {
	// Port of the webhook's TLS server (--webhook-port).
	Port int
	// BindHost is the address it binds; empty: all (--webhook-bind-host).
	BindHost string
	// URL is how the API server reaches the webhook out of cluster; empty: the Service
	// (--webhook-url).
	URL string
	// Service is the webhook's Service in flotilla-system (--webhook-service).
	Service string
	// CertDir is where the serving certificate is written; empty: a new temporary directory
	// (--webhook-cert-dir).
	CertDir string
	// CAInjectedFrom is the NAMESPACE/NAME of a cert-manager Certificate mounted at CertDir: no
	// certificate of the manager's own, cert-manager injects the caBundle
	// (--webhook-ca-injected-from).
	CAInjectedFrom string
	// ClientNames are the common names of the client certificates the API server presents to
	// webhooks (its --admission-control-config-file names one): when set, only a caller with a
	// certificate of the cluster's client CA and one of these names is served
	// (--webhook-client-names). Empty: any caller, where the API server cannot be configured.
	ClientNames []string
}

// ElectionOptions configure pod election: admission, the proxy and dependency reconcilers, the
// sweep and the namespace cleanup.
type ElectionOptions struct {
	// AcceptAdmiralty elects pods annotated multicluster.admiralty.io/elect too
	// (--accept-admiralty-annotation).
	AcceptAdmiralty bool
	// ProxyPlacement is ProxyPlacementWebhook or ProxyPlacementScheduler (--proxy-placement).
	ProxyPlacement string
	// PodNetwork is PodNetworkIsolated or PodNetworkFlat (--pod-network).
	PodNetwork string
	// ProxyWorkers are the proxies reconciled in parallel (--proxy-workers).
	ProxyWorkers int
	// ProxyWorkersPerCluster bounds, of ProxyWorkers, those working on one secondary at once;
	// 0: half of ProxyWorkers (--proxy-workers-per-cluster).
	ProxyWorkersPerCluster int
	// QuietStart is how long a delegate the manager created may simply start before its proxy's
	// status is written; zero: none (--quiet-start).
	QuietStart time.Duration
	// SweepInterval is how often delegates whose proxy is gone are swept (--sweep-interval).
	SweepInterval time.Duration
	// NamespaceCleanupInterval is how often the namespaces Flotilla created in secondaries are
	// looked at (--namespace-cleanup-interval).
	NamespaceCleanupInterval time.Duration
	// DependencyGrace is how long an unused copy, or an empty namespace Flotilla created, stays in
	// a secondary (--dependency-grace).
	DependencyGrace time.Duration
	// RebalanceOnReturn moves elected pods back to a secondary that returned from a failover
	// (--rebalance-on-return), once it has been Ready for RebalanceAfter (--rebalance-after).
	RebalanceOnReturn bool
	RebalanceAfter    time.Duration
	// RebalanceInterval paces the rebalancer's rounds (--rebalance-interval): each evicts at most
	// one pod per controller, so a controller's pods move back one per round.
	RebalanceInterval time.Duration
	// TenancyDefaultDeny: a namespace bound to no ClusterSet may use no cluster
	// (--tenancy-default-deny); off, it may use every cluster.
	TenancyDefaultDeny bool
}

// ReplicatorOptions configure the Replicator controller.
type ReplicatorOptions struct {
	// Timeout bounds a Replicator's work in one cluster (--replication-timeout).
	Timeout time.Duration
	// Resync is how often a synced Replicator is applied again (--replicator-resync-interval).
	Resync time.Duration
	// Retry is how soon a Replicator not synced everywhere is tried again
	// (--replicator-retry-interval).
	Retry time.Duration
}

// DefaultOptions are the manager's defaults, the one place they are written; a default a package
// also applies to its zero value is taken from that package's constant.
func DefaultOptions() Options {
	names := flotillav1.NamesFrom(flotillav1.DefaultNamePrefix)
	return Options{
		Names: names,
		Manager: ManagerOptions{
			MetricsBindAddress:     ":8443",
			MetricsSecure:          true,
			HealthProbeBindAddress: ":8081",
			// client-go's default of 5 would throttle Flotilla.
			QPS:   500,
			Burst: 1000,
		},
		LeaderElection: LeaderElectionOptions{
			Enabled:       true,
			Namespace:     flotillav1.SystemNamespace,
			ID:            names.ManagerLease,
			LeaseDuration: 15 * time.Second,
			RenewDeadline: 10 * time.Second,
			RetryPeriod:   2 * time.Second,
		},
		Clusters: ClusterOptions{
			PrimaryName:          "primary",
			MulticlusterServices: true,
			ProbeInterval:        clusters.DefaultProbeInterval,
			ProbeTimeout:         clusters.DefaultProbeTimeout,
			TokenRenewalFraction: clusters.DefaultRenewalFraction, AgentCredentialLifetime: 24 * time.Hour,
		},
		VirtualNodes: VirtualNodeOptions{
			KubeletPort:      10250,
			KubeletPortCount: 100,
			FailoverAfter:    virtualnode.DefaultFailoverAfter,
		},
		Webhook: WebhookOptions{
			Port:    9443,
			Service: names.WebhookService,
		},
		Election: ElectionOptions{
			AcceptAdmiralty:          true,
			ProxyPlacement:           ProxyPlacementWebhook,
			PodNetwork:               PodNetworkIsolated,
			ProxyWorkers:             96,
			QuietStart:               proxy.DefaultQuietStart,
			SweepInterval:            30 * time.Second,
			NamespaceCleanupInterval: 5 * time.Minute,
			DependencyGrace:          time.Minute,
			RebalanceAfter:           2 * time.Minute,
			RebalanceInterval:        10 * time.Second,
		},
		Replicator: ReplicatorOptions{
			Timeout: 10 * time.Second,
			Resync:  replicator.DefaultResync,
			Retry:   replicator.DefaultRetry,
		},
		// Off until an endpoint is given; then every new trace is kept (lower it for a large fleet:
		// an elected pod's trace follows its API server's sampling whatever this rate).
		Tracing: tracing.Options{SamplingRate: 1},
	}
}

// Validate refuses settings the manager cannot run with, naming their flags.
func (o Options) Validate() error {
	errs := []error{o.Tracing.Validate()}
	if err := ValidateNamePrefix(o.Names.Prefix); err != nil {
		errs = append(errs, fmt.Errorf("--name-prefix %q: %w", o.Names.Prefix, err))
	}
	if o.Election.PodNetwork != PodNetworkIsolated && o.Election.PodNetwork != PodNetworkFlat {
		errs = append(errs, fmt.Errorf("--pod-network %q: want %s or %s", o.Election.PodNetwork, PodNetworkIsolated, PodNetworkFlat))
	}
	if o.Election.ProxyPlacement != ProxyPlacementWebhook && o.Election.ProxyPlacement != ProxyPlacementScheduler {
		errs = append(errs, fmt.Errorf("--proxy-placement must be %s or %s, not %q", ProxyPlacementWebhook, ProxyPlacementScheduler, o.Election.ProxyPlacement))
	}
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{
		{"--sweep-interval", o.Election.SweepInterval},
		{"--namespace-cleanup-interval", o.Election.NamespaceCleanupInterval},
		{"--rebalance-interval", o.Election.RebalanceInterval},
		{"--replication-timeout", o.Replicator.Timeout},
	} {
		if d.value <= 0 {
			errs = append(errs, fmt.Errorf("%s %s: want more than 0", d.flag, d.value))
		}
	}
	if o.Election.QuietStart < 0 {
		errs = append(errs, fmt.Errorf("--quiet-start %s: want 0 (none) or more", o.Election.QuietStart))
	}
	if c := o.Clusters; c.TunnelBindAddress != "" && c.TunnelCertDir == "" {
		errs = append(errs, fmt.Errorf("--tunnel-bind-address %s: --tunnel-cert-dir must hold the endpoint's serving certificate (tls.crt, tls.key)", c.TunnelBindAddress))
	}
	if c := o.Clusters; c.AgentCredentialLifetime < 10*time.Minute {
		errs = append(errs, fmt.Errorf("--agent-credential-lifetime %s: at least 10m (the API server's shortest token)", c.AgentCredentialLifetime))
	}
	if n := o.VirtualNodes; n.KubeletPort > 0 && (n.KubeletPortCount < 1 || int64(n.KubeletPort)+int64(n.KubeletPortCount)-1 > 65535) {
		errs = append(errs, fmt.Errorf("--kubelet-port %d --kubelet-port-count %d: want at least one port, the last at most 65535", n.KubeletPort, n.KubeletPortCount))
	}
	return errors.Join(errs...)
}

// kubeletPorts is the range of the virtual nodes' kubelet ports (none when the kubelet API is off).
func (o VirtualNodeOptions) kubeletPorts() (first, count int32) {
	if o.KubeletPort <= 0 {
		return 0, 0
	}
	return o.KubeletPort, o.KubeletPortCount
}

// proxyWorkersPerCluster is ProxyWorkersPerCluster, else half of ProxyWorkers (at least one).
func (o ElectionOptions) proxyWorkersPerCluster() int {
	return cmp.Or(o.ProxyWorkersPerCluster, max(1, o.ProxyWorkers/2))
}

// nodeAddress is the address the virtual nodes advertise and the kubelet API's certificate names.
func (o VirtualNodeOptions) nodeAddress() string {
	return cmp.Or(o.Address, "127.0.0.1")
}

// MaxNamePrefix is the longest --name-prefix: its longest Service name (<prefix>-manager-metrics)
// still fits the 63 characters of a DNS label, with room to spare.
const MaxNamePrefix = 40

// ValidateNamePrefix refuses a prefix the names made from it could not carry: each must be a DNS
// label (a Service's name) once suffixed.
func ValidateNamePrefix(prefix string) error {
	if len(prefix) > MaxNamePrefix {
		return fmt.Errorf("at most %d characters", MaxNamePrefix)
	}
	if errs := validation.IsDNS1035Label(prefix); len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}
