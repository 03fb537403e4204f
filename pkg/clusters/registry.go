package clusters

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/tunnel"
)

// Role says what a registered cluster is to this primary.
type Role string

const (
	// RoleUnknown means the cluster has not answered yet, so its identity is not known.
	RoleUnknown Role = ""
	// RolePrimary means the context is the primary's own.
	RolePrimary Role = flotillav1.RolePrimary
	// RoleSecondary is a cluster that gets a virtual node.
	RoleSecondary Role = flotillav1.RoleSecondary
)

// Options configure a Registry. Zero values take the documented defaults.
type Options struct {
	// PrimaryID is the UID of the primary's kube-system namespace. Required.
	PrimaryID string
	// KnownIDs maps cluster names to the IDs recorded before (ClusterDetector status), so a
	// secondary that is down when the manager starts keeps its virtual node and shows NotReady.
	KnownIDs map[string]string
	// ProbeInterval is the time between two health probes of a cluster. Default DefaultProbeInterval.
	ProbeInterval time.Duration
	// ProbeTimeout bounds one probe, so a hung API server counts as down. Default DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// FailureThreshold is how many failed probes in a row make a cluster Unknown. Default 2.
	FailureThreshold int
	// CallTimeout bounds every request-response call to a cluster (not watches, not streams), so a
	// cluster that accepts connections and never answers holds no worker for long. Default 15s.
	CallTimeout time.Duration
	// QPS and Burst of the clients of each cluster. Defaults 300 and 600.
	QPS   float32
	Burst int
	// TokenRenewer, when set, is called for a context whose token is past RenewalFraction of its lifetime.
	TokenRenewer TokenRenewer
	// RenewalFraction of a token's lifetime after which it is renewed. Default DefaultRenewalFraction.
	RenewalFraction float64
	// Elected closes when this replica becomes the leader (the manager's Elected()): only the
	// leader writes (token renewal, cleanup). Nil: this replica always leads.
	Elected <-chan struct{}
	// CapacitySyncDeadline is how long readiness waits, at start, for a Running secondary's
	// capacity to sync: one whose LIST takes longer (a very large or slow secondary) is not waited
	// for beyond it. Default 30s.
	CapacitySyncDeadline time.Duration
	// Clock tells the readiness deadline (default: the real one).
	Clock clock.PassiveClock
	// WrapTransport, when set, wraps every client's transport of every cluster (tracing: a
	// request made inside a span carries its context to the cluster's API server).
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// Tunnels dials the clusters registered in pull mode (AnnotationModes) through their agents'
	// tunnels; nil: this manager serves no tunnel, and such a cluster is InvalidContext.
	Tunnels Tunnels
}

// Tunnels dials a cluster through the tunnel its agent holds (tunnel.Server).
type Tunnels interface {
	// Dialer returns the dial function of the cluster's connections (rest.Config.Dial).
	Dialer(cluster string) func(ctx context.Context, network, addr string) (net.Conn, error)
	// Status is what the endpoint knows of the cluster's tunnel.
	Status(cluster string) tunnel.Status
}

func (o *Options) defaults() {
	if o.ProbeInterval == 0 {
		o.ProbeInterval = DefaultProbeInterval
	}
	if o.ProbeTimeout == 0 {
		o.ProbeTimeout = DefaultProbeTimeout
	}
	if o.FailureThreshold == 0 {
		o.FailureThreshold = 2
	}
	if o.QPS == 0 {
		o.QPS = 300
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = 15 * time.Second
	}
	if o.Burst == 0 {
		o.Burst = 600
	}
	if o.RenewalFraction <= 0 || o.RenewalFraction >= 1 {
		o.RenewalFraction = DefaultRenewalFraction
	}
	if o.CapacitySyncDeadline == 0 {
		o.CapacitySyncDeadline = 30 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
}

// Registry owns the registered clusters: it applies the registration kubeconfig, probes each
// cluster, keeps its capacity and its informers, and hands their events out as sources. It is a
// manager.Runnable that runs on every replica (the webhook and the kubelet API read it).
type Registry struct {
	opts Options
	log  logr.Logger

	mu         sync.Mutex
	ctx        context.Context // set by Start; clusters start when it is
	clusters   map[string]*cluster
	claims     map[string]string // cluster ID -> name of the cluster that registered it first
	configured bool
	configErr  error
	// removed are the clusters removed on purpose (SetRemoved).
	removed map[string]bool
	// pinned are the identities pinned in the registration Secret (SetPinned); known are the IDs
	// an earlier run recorded (Options.KnownIDs), less those of clusters removed since.
	pinned, known map[string]string
	// storageClasses are the clusters' storage class settings (SetStorageClasses).
	storageClasses map[string]string
	// modes are how the clusters are reached (SetModes).
	modes map[string]string
	// watches are the Watches the started sources declared, by name, in their order (source.go).
	watches    map[string]Watch
	watchOrder []string
	// sinks receive events of the started sources (source.go).
	sinks    []*sink
	nextSink int
	// ready latches the first time Ready answers nil: from then on the webhook's readiness never
	// depends on any one secondary (readiness.go).
	ready atomic.Bool
}

var _ manager.Runnable = (*Registry)(nil)
var _ manager.LeaderElectionRunnable = (*Registry)(nil)

// NewRegistry returns a Registry; add it to the manager to start probing.
func NewRegistry(opts Options, log logr.Logger) *Registry {
	opts.defaults()
	r := &Registry{opts: opts, log: log, clusters: map[string]*cluster{}, claims: map[string]string{},
		pinned: map[string]string{}, known: map[string]string{}, watches: map[string]Watch{}}
	// Claims start from what an earlier run knew: a second context for a known secondary that
	// answers before it (it is down, or slower) is the duplicate, not the known one.
	for name, id := range opts.KnownIDs {
		r.known[name] = id
		if id != "" && id != opts.PrimaryID {
			r.claims[id] = name
		}
	}
	return r
}

// SetStorageClasses records each cluster's storage class setting from the registration Secret
// (AnnotationStorageClasses): snapshots carry it from then on.
func (r *Registry) SetStorageClasses(classes map[string]string) {
	r.mu.Lock()
	var changed []string
	for name := range r.clusters {
		if r.storageClasses[name] != classes[name] {
			changed = append(changed, name)
		}
	}
	r.storageClasses = classes
	r.mu.Unlock()
	// Their ClusterDetectors (and whoever follows cluster changes) see the new setting now.
	for _, name := range changed {
		r.notify(name)
	}
}

// SetModes records how each cluster is reached, from the registration Secret (AnnotationModes).
// A cluster's mode is part of its connection: a change restarts it at the next Apply.
func (r *Registry) SetModes(modes map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.modes = modes
}

// mode is how a cluster is reached ("" for directly).
func (r *Registry) mode(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.modes[name]
}

// SetPinned records the identities pinned in the registration Secret (AnnotationClusterIDs):
// a cluster answering with another ID is IdentityChanged; a new pin (join again) is accepted at
// the next probe. A pin never takes an identity from the registered cluster that claimed it
// first: the same cluster added again under a second name is pinned to the same ID, and is the
// duplicate (claim), whatever order the pins are read in.
func (r *Registry) SetPinned(pinned map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pinned = map[string]string{}
	names := make([]string, 0, len(pinned))
	for name := range pinned {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		id := pinned[name]
		r.pinned[name] = id
		if id == "" || id == r.opts.PrimaryID {
			continue
		}
		if owner, ok := r.claims[id]; ok && owner != name {
			if _, still := r.clusters[owner]; still {
				continue
			}
		}
		r.claims[id] = name
	}
}

// pinnedID is the identity a cluster must answer with: the one pinned in the registration
// Secret, else current (the one recorded before, or first seen); "" while none is known.
func (r *Registry) pinnedID(name, current string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id := r.pinned[name]; id != "" {
		return id
	}
	return current
}

// knownID is the ID an earlier run recorded for a cluster name ("" if none).
func (r *Registry) knownID(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.known[name]
}

// NeedLeaderElection says no: every replica serves the webhook and needs the clusters' state;
// what writes (token renewal, cleanup) runs on the leader only (Options.Elected).
func (r *Registry) NeedLeaderElection() bool { return false }

// Start starts the clusters applied so far and stops them all when ctx ends.
func (r *Registry) Start(ctx context.Context) error {
	r.mu.Lock()
	r.ctx = ctx
	for _, c := range r.clusters {
		c.start(ctx)
	}
	r.mu.Unlock()
	<-ctx.Done()
	r.mu.Lock()
	all := make([]*cluster, 0, len(r.clusters))
	for _, c := range r.clusters {
		all = append(all, c)
	}
	r.mu.Unlock()
	for _, c := range all {
		c.stop()
	}
	return nil
}

// PrimaryID is the primary's identity.
func (r *Registry) PrimaryID() string { return r.opts.PrimaryID }

// isLeader says whether this replica leads.
func (r *Registry) isLeader() bool {
	if r.opts.Elected == nil {
		return true
	}
	select {
	case <-r.opts.Elected:
		return true
	default:
		return false
	}
}

// Configured says whether a registration Secret has been applied (or found missing) at least
// once; before that, the absence of a cluster means nothing.
func (r *Registry) Configured() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.configured
}

// ConfiguredRecheck is how soon a reconciler that waits for Configured looks again.
const ConfiguredRecheck = time.Second

// UntilConfigured is the wait of a reconciler that concludes from what the registry does not
// hold (a cluster missing from the snapshots is one that left): while no registration Secret has
// been applied yet (a manager that has just started), it returns a requeue and true, and the
// reconciler writes nothing.
func (r *Registry) UntilConfigured() (ctrl.Result, bool) {
	if r.Configured() {
		return ctrl.Result{}, false
	}
	return ctrl.Result{RequeueAfter: ConfiguredRecheck}, true
}

// ConfigError is the reason the last registration Secret was not applied, or nil.
func (r *Registry) ConfigError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.configErr
}

// Snapshot returns the state of one cluster.
func (r *Registry) Snapshot(name string) (Snapshot, bool) {
	r.mu.Lock()
	c, ok := r.clusters[name]
	class := r.storageClasses[name]
	r.mu.Unlock()
	if !ok {
		return Snapshot{}, false
	}
	s := c.snapshot()
	s.StorageClass = class
	r.withTunnel(&s)
	return s, true
}

// withTunnel adds a pulled cluster's tunnel state to its snapshot.
func (r *Registry) withTunnel(s *Snapshot) {
	if s.Mode == ModePull && r.opts.Tunnels != nil {
		st := r.opts.Tunnels.Status(s.Name)
		s.Tunnel = &st
	}
}

// Snapshots returns the state of every cluster, sorted by name.
func (r *Registry) Snapshots() []Snapshot {
	r.mu.Lock()
	all := make([]*cluster, 0, len(r.clusters))
	for _, c := range r.clusters {
		all = append(all, c)
	}
	classes := r.storageClasses
	r.mu.Unlock()
	out := make([]Snapshot, 0, len(all))
	for _, c := range all {
		s := c.snapshot()
		s.StorageClass = classes[s.Name]
		r.withTunnel(&s)
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ErrSecretMissing is the ConfigError while the registration Secret or its key does not exist.
var ErrSecretMissing = errors.New("the registration Secret " + flotillav1.SystemNamespace + "/" +
	flotillav1.KubeconfigSecretName + " or its key " + flotillav1.KubeconfigSecretKey + " does not exist")

// Apply makes the registered clusters those of the kubeconfig raw. A kubeconfig that does not
// parse changes nothing but ConfigError. raw == nil means the Secret or its key is missing:
// then no cluster is registered yet, or the ones registered stay.
func (r *Registry) Apply(raw []byte) error {
	var desired map[string]*cluster
	var err error
	if raw == nil {
		err = ErrSecretMissing
	} else {
		desired, err = r.parse(raw)
	}
	r.mu.Lock()
	first := !r.configured
	r.configured = true
	changedConfigErr := (r.configErr == nil) != (err == nil) || (err != nil && r.configErr.Error() != err.Error())
	r.configErr = err
	// A Secret not there yet (before the first join) is not refused; one that does not parse is.
	recordRefused("", err != nil && !errors.Is(err, ErrSecretMissing))
	var known []*cluster
	if first {
		// Clusters an earlier run knew (ClusterDetectors) but the registration does not name are
		// detached, not forgotten: their virtual nodes and proxies stay.
		known = r.detachKnown(desired)
	}
	if err != nil {
		r.mu.Unlock()
		for _, c := range known {
			r.notify(c.name)
		}
		if changedConfigErr || first {
			r.notify("")
		}
		return err
	}
	added, restarted, detached, dropped, changed := r.diff(desired)
	ctx := r.ctx
	r.mu.Unlock()

	for _, c := range restarted {
		c.stop()
	}
	for _, c := range detached {
		r.log.Info("Cluster detached: its context left the registration; nothing of it is deleted", "cluster", c.name)
		c.stop()
		r.notify(c.name)
	}
	for _, c := range dropped {
		r.log.Info("Cluster removed", "cluster", c.name, "context", c.entry.Context)
		forgetCluster(c.name)
		c.stop()
		r.notify(c.name)
	}
	for _, c := range added {
		r.log.Info("Cluster registered", "cluster", c.name, "context", c.entry.Context)
		if ctx != nil {
			c.start(ctx)
		}
		r.notify(c.name)
	}
	for _, c := range known {
		r.notify(c.name)
	}
	for _, name := range changed {
		r.notify(name)
	}
	if changedConfigErr || first {
		r.notify("")
	}
	return nil
}

// SetRemoved records the clusters removed on purpose (the registration Secret's
// flotilla.dev/removed-clusters): only those are let go when their context is not registered.
func (r *Registry) SetRemoved(removed map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removed = removed
}

// Removed says whether a cluster was removed on purpose: its virtual node may be deleted.
func (r *Registry) Removed(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.removed[name]
}

// detachKnown adds a detached cluster for every known ID the registration does not name (r.mu held).
func (r *Registry) detachKnown(desired map[string]*cluster) []*cluster {
	var out []*cluster
	for name, id := range r.known {
		if _, ok := desired[name]; ok || id == "" || id == r.opts.PrimaryID || r.removed[name] {
			continue
		}
		if _, ok := r.clusters[name]; ok {
			continue
		}
		c := newDetached(r, name, Snapshot{Name: name, Role: RoleSecondary, ID: id})
		r.clusters[name] = c
		out = append(out, c)
	}
	return out
}

// diff updates r.clusters to desired (r.mu held) and says what to start, restart, detach, drop
// and announce. A usable secondary whose context is gone is detached (kept, not probed, reported
// NotRegistered) unless it was removed on purpose; any other cluster whose context is gone is
// dropped.
func (r *Registry) diff(desired map[string]*cluster) (added, restarted, detached, dropped []*cluster, changed []string) {
	for name, want := range desired {
		have, ok := r.clusters[name]
		switch {
		case !ok:
			added = append(added, want)
		case have.fingerprint != want.fingerprint:
			restarted = append(restarted, have) // restarted with the new settings, keeping what it learned
			want.inherit(have)
			added = append(added, want)
		default:
			if have.setToken(want.currentToken()) {
				changed = append(changed, name)
			}
		}
	}
	for name, have := range r.clusters {
		if _, ok := desired[name]; ok {
			continue
		}
		switch {
		case r.removed[name], !have.detached && !have.snapshot().UsableSecondary():
			// Removed on purpose, or never a usable secondary (a context that never answered, a
			// duplicate registration, the primary's own): nothing of it is in any secondary.
			dropped = append(dropped, have)
			delete(r.clusters, name)
			delete(r.known, name) // a cluster registered under this name later is a new one
		case have.detached:
			continue
		default:
			detached = append(detached, have)
			r.clusters[name] = newDetached(r, name, have.snapshot())
		}
		for id, owner := range r.claims {
			if owner == name {
				delete(r.claims, id)
			}
		}
	}
	for _, c := range added {
		r.clusters[c.name] = c
	}
	return added, restarted, detached, dropped, changed
}

// parse turns a kubeconfig into clusters (not started). A context that cannot be used is still a
// cluster: it shows as Unknown with the reason.
func (r *Registry) parse(raw []byte) (map[string]*cluster, error) {
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		return nil, fmt.Errorf("parsing the registration kubeconfig: %w", err)
	}
	out := map[string]*cluster{}
	for ctxName, kctx := range cfg.Contexts {
		name := ClusterName(ctxName)
		if prev, ok := out[name]; ok {
			return nil, fmt.Errorf("contexts %q and %q get the same cluster name %q", prev.entry.Context, ctxName, name)
		}
		entry := Entry{Context: ctxName, Cluster: kctx.Cluster, User: kctx.AuthInfo}
		out[name] = newCluster(r, name, entry, cfg)
	}
	return out, nil
}

// fingerprint hashes what a connection depends on, except a token (renewed in place).
func fingerprint(cfg *clientcmdapi.Config, kctx *clientcmdapi.Context) string {
	var user *clientcmdapi.AuthInfo
	if u, ok := cfg.AuthInfos[kctx.AuthInfo]; ok {
		cp := *u
		cp.Token = ""
		user = &cp
	}
	raw, _ := json.Marshal(struct {
		Cluster   *clientcmdapi.Cluster
		User      *clientcmdapi.AuthInfo
		Namespace string
	}{cfg.Clusters[kctx.Cluster], user, kctx.Namespace})
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// claim records that cluster name answered with id. It returns the name of the cluster that owns
// the id: name itself, or another cluster registered earlier (then name is a duplicate).
func (r *Registry) claim(id, name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if owner, ok := r.claims[id]; ok && owner != name {
		if _, still := r.clusters[owner]; still {
			return owner
		}
	}
	r.claims[id] = name
	// A name owns one identity: the one it held before (a re-pinned cluster's) is free again.
	for other, owner := range r.claims {
		if owner == name && other != id {
			delete(r.claims, other)
		}
	}
	return name
}
