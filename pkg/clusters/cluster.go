package clusters

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/logging"
	"github.com/flotilla-dev/flotilla/pkg/tunnel"
)

// Entry is the raw kubeconfig entries a cluster was registered with.
type Entry struct {
	Context, Cluster, User string
}

// Snapshot is a copy of what the registry knows of one cluster.
type Snapshot struct {
	// Name is the cluster name (DNS-1123), derived from the context name.
	Name string
	// Entry is the context, cluster and user entries of the registration kubeconfig.
	Entry Entry
	// Role is primary, secondary, or unknown until the cluster first answers.
	Role Role
	// ID is the UID of the cluster's kube-system namespace.
	ID string
	// Status is Running or Unknown; Reason and Message say why it is Unknown.
	Status          flotillav1.ClusterStatus
	Reason, Message string
	// Version is the cluster's API server version.
	Version string
	// LastProbe is when the cluster was last probed, LastTransition when Status last changed
	// (at first, when the cluster was registered).
	LastProbe, LastTransition time.Time
	// Capacity is what the cluster offers; CapacitySynced says whether it was computed from
	// synced informers.
	Capacity       Capacity
	CapacitySynced bool
	// TokenExpiry is when the registered token expires (nil for other credentials).
	TokenExpiry *time.Time
	// OwnerMessage is non-empty when the FlotillaPrimary object could not be ensured there.
	OwnerMessage string
	// Allowance is the most the secondary lends this primary (its PrimaryAllowance's hard
	// limits), nil when it lends without limit; Capacity.Allocatable is already the lesser of it
	// and what is free. AllowanceUsed is what the secondary's lender counts used against it.
	Allowance, AllowanceUsed corev1.ResourceList
	// StorageClass is the class the cluster gives real claims: its registration's setting, ""
	// for its default StorageClass, StorageClassNone for none.
	StorageClass string
	// Mode is how the manager reaches the cluster: ModePull through its agent's tunnel, "" directly.
	Mode string
	// Tunnel is a pulled cluster's tunnel as the endpoint sees it (nil for others, or with no endpoint).
	Tunnel *tunnel.Status
	// MissingFeatures are the Features the cluster does not serve, each with what Flotilla does
	// without it (MissingFeatures), read from its discovery with its identity and version.
	MissingFeatures []string
}

// UsableSecondary says whether the cluster should have a virtual node: a secondary whose identity
// is known and that is not a duplicate registration.
func (s Snapshot) UsableSecondary() bool {
	return s.Role == RoleSecondary && s.ID != "" && s.Reason != flotillav1.ReasonDuplicateCluster
}

// cluster is one registered cluster: its clients, probe loop and capacity informers.
type cluster struct {
	registry    *Registry
	name        string
	entry       Entry
	fingerprint string
	token       atomic.Pointer[string]
	renewing    atomic.Bool
	// detached is a cluster whose context left the registration without being removed: no
	// clients, no probes, its last known identity kept (newDetached).
	detached bool

	config    *rest.Config // nil when the context cannot be used
	configErr error
	client    kubernetes.Interface
	ctrl      client.Client    // typed access to Flotilla's objects there
	watcher   client.WithWatch // the informers' client (no call timeout)

	mu           sync.Mutex
	state        Snapshot
	failures     int
	everAnswered bool
	// ownerChecked says the FlotillaPrimary was ensured once; it is checked again every ownerRecheckProbes.
	ownerChecked          bool
	probesSinceOwnerCheck int
	// probesSinceAllowanceRead counts the good probes since the PrimaryAllowance was last read.
	probesSinceAllowanceRead int
	allowanceRead            bool
	ownerUID                 string
	// probesSinceIdentify counts good probes since the identity was last read; it is read again
	// every identityRecheckProbes, after any failed probe, and while it is IdentityChanged.
	probesSinceIdentify int
	capacity            *capacityWatch
	// connectionLost says a probe met a refused or reset connection since the last answer: the
	// server went away, and its watches with it (restartWatches).
	connectionLost bool
	// lastCapacity is what a restarted capacity watch knew; it serves until the new one syncs.
	lastCapacity *Capacity
	remote       *remoteWatch
	cancel       context.CancelFunc
	done         chan struct{}
}

// NewScheme knows every kind Flotilla reads or writes in a cluster: client-go's, Flotilla's own
// and the Multi-Cluster Services API's. The registry's clients, the manager's and flotillactl's
// start from it.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(flotillav1.AddToScheme(s))
	utilruntime.Must(mcsv1beta1.Install(s))
	// A Replicator's replicateCRDs reads definitions in the primary and writes them in secondaries.
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}

var flotillaScheme = NewScheme()

func newCluster(r *Registry, name string, entry Entry, cfg *clientcmdapi.Config) *cluster {
	c := &cluster{registry: r, name: name, entry: entry}
	c.state = Snapshot{Name: name, Entry: entry, Status: flotillav1.ClusterUnknown, Reason: flotillav1.ReasonProbing,
		Message: "Not probed yet", LastTransition: r.opts.Clock.Now()}
	if id := r.knownID(name); id != "" {
		c.state.ID = id
		if id == r.opts.PrimaryID {
			c.state.Role = RolePrimary
		} else {
			c.state.Role = RoleSecondary
		}
	}
	kctx := cfg.Contexts[entry.Context]
	mode := r.mode(name)
	c.state.Mode = mode
	// How it is reached is part of the connection: a change of mode restarts it.
	c.fingerprint = fingerprint(cfg, kctx) + "/" + mode
	if user, ok := cfg.AuthInfos[entry.User]; ok {
		c.setToken(user.Token)
	} else {
		c.setToken("")
	}
	// A refused context (ValidateContext) gets no client at all: it is shown, never probed.
	restCfg, err := RESTConfigFor(cfg, entry.Context)
	if err != nil {
		c.configErr = err
		c.state.Reason, c.state.Message = flotillav1.ReasonInvalidContext, err.Error()
		return c
	}
	restCfg, err = c.withTokenFromCluster(restCfg)
	if err == nil && mode != "" {
		restCfg, err = r.dialFor(name, mode, restCfg)
	}
	if err == nil && r.opts.WrapTransport != nil {
		restCfg = rest.CopyConfig(restCfg)
		restCfg.Wrap(r.opts.WrapTransport)
	}
	if err == nil {
		restCfg.QPS, restCfg.Burst = r.opts.QPS, r.opts.Burst
		restCfg.UserAgent = "flotilla-manager"
		c.client, err = kubernetes.NewForConfig(restCfg)
	}
	if err == nil {
		// Informers and streams (exec, logs) use restCfg; the calls of reconcilers have a deadline.
		calls := rest.CopyConfig(restCfg)
		calls.Timeout = r.opts.CallTimeout
		c.ctrl, err = client.New(calls, client.Options{Scheme: flotillaScheme})
	}
	if err == nil {
		c.watcher, err = client.NewWithWatch(restCfg, client.Options{Scheme: flotillaScheme})
	}
	if err != nil {
		c.configErr = fmt.Errorf("context %q cannot be used: %w", entry.Context, err)
		c.state.Reason, c.state.Message = flotillav1.ReasonInvalidContext, c.configErr.Error()
		return c
	}
	c.config = restCfg
	return c
}

// dialFor makes a cluster's connections dial as its mode says: a pulled cluster through its
// agent's tunnel, whatever its server's address (TLS still verifies that server's name and CA).
func (r *Registry) dialFor(name, mode string, cfg *rest.Config) (*rest.Config, error) {
	switch {
	case mode != ModePull:
		return nil, fmt.Errorf("cluster %s: unknown mode %q in %s (only %q)", name, mode, AnnotationModes, ModePull)
	case r.opts.Tunnels == nil:
		return nil, fmt.Errorf("cluster %s is registered in pull mode, and this manager serves no tunnel for its agent (--tunnel-bind-address)", name)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Dial = r.opts.Tunnels.Dialer(name)
	// Never through an HTTP proxy of the environment: the tunnel is the only way there.
	cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	return cfg, nil
}

// errNotRegistered is the configErr of a detached cluster: nothing to connect with.
var errNotRegistered = errors.New("the context is no longer in the registration Secret")

// newDetached is a cluster whose context left the registration (or that an earlier run knew and
// the registration does not name): it keeps its identity and role, so its virtual node stays
// (cordoned, NotReady) and nothing of it is deleted, until the context is back or the cluster is
// removed with `flotillactl cluster remove`.
func newDetached(r *Registry, name string, prev Snapshot) *cluster {
	c := &cluster{registry: r, name: name, entry: prev.Entry, detached: true, configErr: errNotRegistered}
	st := prev
	st.Capacity, st.CapacitySynced, st.TokenExpiry = Capacity{}, false, nil
	if st.Status != flotillav1.ClusterUnknown || st.LastTransition.IsZero() {
		st.LastTransition = r.opts.Clock.Now()
	}
	st.Status, st.Reason = flotillav1.ClusterUnknown, flotillav1.ReasonNotRegistered
	st.Message = fmt.Sprintf("Cluster %s is no longer in the registration Secret: its delegates are left running and its virtual node is cordoned; "+
		"register it again, or remove it with `flotillactl cluster remove %s`", name, name)
	c.state = st
	return c
}

// withTokenFromCluster makes a token credential be read per request, so that a renewed token
// replaces the old one without a new connection.
func (c *cluster) withTokenFromCluster(cfg *rest.Config) (*rest.Config, error) {
	if cfg.BearerToken == "" {
		return cfg, nil
	}
	cfg = rest.CopyConfig(cfg)
	cfg.BearerToken, cfg.BearerTokenFile = "", ""
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if tok := c.currentToken(); tok != "" && req.Header.Get("Authorization") == "" {
				req = req.Clone(req.Context())
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg, nil
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func (c *cluster) currentToken() string {
	if p := c.token.Load(); p != nil {
		return *p
	}
	return ""
}

// setToken stores the token and its expiry; it says whether the token changed.
func (c *cluster) setToken(tok string) bool {
	old := c.currentToken()
	c.token.Store(&tok)
	exp, _ := TokenExpiry(tok)
	c.mu.Lock()
	c.state.TokenExpiry = exp
	c.mu.Unlock()
	return old != tok
}

// inherit keeps what an earlier incarnation of the same cluster learned (identity, version).
func (c *cluster) inherit(old *cluster) {
	s := old.snapshot()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.ID == "" {
		c.state.ID, c.state.Role = s.ID, s.Role
	}
	c.state.Version = s.Version
}

func (c *cluster) snapshot() Snapshot {
	c.mu.Lock()
	s := c.state
	cw, last := c.capacity, c.lastCapacity
	c.mu.Unlock()
	if cw != nil {
		s.Capacity, s.CapacitySynced = cw.current()
	}
	if !s.CapacitySynced && last != nil {
		// A restarted watch that has not synced yet: what it knew before serves meanwhile.
		s.Capacity, s.CapacitySynced = *last, true
	}
	s.Capacity.Allocatable = Lend(s.Capacity.Allocatable, s.Allowance)
	return s
}

func (c *cluster) start(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		return
	}
	cctx, cancel := context.WithCancel(ctx)
	c.cancel, c.done = cancel, make(chan struct{})
	go c.run(cctx)
}

func (c *cluster) stop() {
	c.mu.Lock()
	cancel, done := c.cancel, c.done
	c.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	c.stopWatches()
}

// restartWatches is called when a secondary answers again after an outage. An informer whose
// list or watch failed meanwhile (or whose server went away: the probes met a refused or reset
// connection) backs off for up to a minute before it lists again, so delegates' status would lag
// that long: that one is stopped now, and this probe starts it afresh (it lists at once). An
// informer whose watch held (a secondary that hung, or only its /readyz failed) is left alone: a
// relist of a large secondary costs every replica, and proves nothing. A capacity watch restarted
// leaves its last capacity to serve until the new one syncs (lastCapacity), so the webhook and
// readiness never lose a secondary they knew.
func (c *cluster) restartWatches(log logr.Logger) {
	c.mu.Lock()
	cw, rw := c.capacity, c.remote
	// A list or watch that failed says so; a server that went away (connection refused or reset)
	// broke every watch too, though a reflector retries that without reporting it, backing off.
	lost := c.connectionLost
	c.connectionLost = false
	restartCapacity := cw != nil && (lost || cw.reflectorFailed())
	restartRemote := rw != nil && (lost || rw.reflectorFailed())
	if restartCapacity {
		if last, synced := cw.current(); synced {
			c.lastCapacity = &last
		}
		c.capacity = nil
	}
	if restartRemote {
		c.remote = nil
	}
	c.mu.Unlock()
	if restartCapacity {
		log.Info("Secondary answers again: restarting its capacity informers, which failed")
		cw.stop()
	}
	if restartRemote {
		log.Info("Secondary answers again: restarting the informers controllers follow there, which failed")
		rw.cancel()
	}
}

// stopWatches stops the secondary's informers (capacity, and every declared Watch); the
// next good probe starts new ones.
func (c *cluster) stopWatches() {
	c.mu.Lock()
	cw, rw := c.capacity, c.remote
	c.capacity, c.remote, c.lastCapacity = nil, nil, nil
	c.mu.Unlock()
	if cw != nil {
		cw.stop()
	}
	if rw != nil {
		rw.cancel()
	}
}

// remoteWatch is the secondary's informers of the declared Watches (nil while not started).
func (c *cluster) remoteWatch() *remoteWatch {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.remote
}

func (c *cluster) run(ctx context.Context) {
	defer close(c.done)
	if c.configErr != nil {
		// Shown, never probed: a refused context says so to the alerts too.
		recordRefused(c.name, c.state.Reason == flotillav1.ReasonInvalidContext)
		return
	}
	recordRefused(c.name, false)
	log := c.registry.log.WithValues("cluster", c.name)
	ticker := time.NewTicker(c.registry.opts.ProbeInterval)
	defer ticker.Stop()
	for {
		c.probe(ctx, log)
		c.maybeRenewToken(ctx, log)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// probe asks the cluster's /readyz, reads its identity when it may have changed (its first
// answer, after a failed probe, every identityRecheckProbes, while it is IdentityChanged, when its
// pin changed) and its version, and updates the state; subscribers hear of it only when something
// they show changed. A cluster answering with another ID than the pinned one is IdentityChanged:
// not used, its watches stopped, nothing of it touched, until its new identity is pinned.
func (c *cluster) probe(ctx context.Context, log logr.Logger) {
	opts := c.registry.opts
	pctx, cancel := context.WithTimeout(ctx, opts.ProbeTimeout)
	defer cancel()
	started := opts.Clock.Now()
	_, err := c.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(pctx)
	c.mu.Lock()
	id, version := c.state.ID, c.state.Version
	recheck := !c.everAnswered || c.failures > 0 || c.state.Reason == flotillav1.ReasonIdentityChanged ||
		c.probesSinceIdentify >= identityRecheckProbes
	c.mu.Unlock()
	pinned := c.registry.pinnedID(c.name, id)
	answeredID := ""
	var missing []string
	if err == nil && (version == "" || id == "" || recheck || pinned != id) {
		answeredID, version, missing, err = c.identify(pctx, log)
	}
	if ctx.Err() != nil {
		return // stopping: not a failure of the cluster
	}
	probeDuration.WithLabelValues(c.name).Observe(opts.Clock.Since(started).Seconds())
	changed := err == nil && answeredID != "" && pinned != "" && answeredID != pinned

	c.mu.Lock()
	before := c.state
	now := c.registry.opts.Clock.Now()
	c.state.LastProbe = now
	c.applyProbe(log, err, changed, pinned, answeredID, version, missing, now)
	id = c.state.ID
	c.mu.Unlock()

	if changed {
		// Informers on the cluster that answers now would report every delegate lost.
		c.stopWatches()
	}
	if err == nil && !changed {
		if before.Status == flotillav1.ClusterUnknown && before.Role == RoleSecondary {
			c.restartWatches(log)
		}
		c.settleRole(ctx, log, id, opts.ProbeTimeout)
	}
	c.announce(log, before, now)
}

// applyProbe sets the state from one probe's outcome: a failure (Unknown after FailureThreshold
// in a row), another identity answering (IdentityChanged), or an answer (Running). c.mu is held.
func (c *cluster) applyProbe(log logr.Logger, err error, changed bool, pinned, answeredID, version string, missing []string, now time.Time) {
	switch {
	case err != nil:
		log.V(logging.Debug).Info("Probe failed", "failures", c.failures+1, "error", err.Error())
		probeFailures.WithLabelValues(c.name).Inc()
		c.failures++
		c.connectionLost = c.connectionLost || connectionLost(err)
		if c.failures >= c.registry.opts.FailureThreshold || !c.everAnswered {
			c.state.Status = flotillav1.ClusterUnknown
			c.state.Reason, c.state.Message = probeFailure(err, c.currentToken(), now)
		}
	case changed:
		// The pinned ID stays the cluster's (its ClusterDetector keeps showing it); what answers
		// is another cluster, whose version is not this one's either.
		c.failures, c.everAnswered, c.probesSinceIdentify = 0, true, 0
		c.state.ID = pinned
		c.state.Status, c.state.Reason = flotillav1.ClusterUnknown, flotillav1.ReasonIdentityChanged
		c.state.Message = identityChangedMessage(c.name, c.entry.Context, pinned, answeredID)
	default:
		c.failures, c.everAnswered = 0, true
		if answeredID != "" {
			c.state.ID, c.probesSinceIdentify = answeredID, 0
		} else {
			c.probesSinceIdentify++
		}
		c.state.Version = version
		if missing != nil {
			c.state.MissingFeatures = missing
		}
		c.state.Status, c.state.Reason, c.state.Message = flotillav1.ClusterRunning, "", ""
	}
}

// announce records a probe's transition time and tells subscribers when something they show
// changed since before.
func (c *cluster) announce(log logr.Logger, before Snapshot, now time.Time) {
	c.mu.Lock()
	after := c.state
	if after.Status != before.Status {
		c.state.LastTransition = now
		after.LastTransition = now
	}
	c.mu.Unlock()
	if after.Status != before.Status || after.Reason != before.Reason || after.Role != before.Role ||
		after.ID != before.ID || after.Version != before.Version || after.OwnerMessage != before.OwnerMessage ||
		!slices.Equal(after.MissingFeatures, before.MissingFeatures) {
		log.Info("Cluster state changed", "status", after.Status, "reason", after.Reason, "role", after.Role, "message", after.Message)
		recordState(after)
		c.registry.notify(c.name)
	}
}

// identityRecheckProbes is how many good probes pass between two reads of a cluster's identity
// (a cluster replaced behind its URL without a failed probe is found within that many).
const identityRecheckProbes = 30

// identityChangedMessage says which identities differ and how to accept the new one.
func identityChangedMessage(name, contextName, pinned, answered string) string {
	return fmt.Sprintf("Cluster %s answered with kube-system UID %s, not %s, the one pinned for it: it was rebuilt, or its "+
		"server now reaches another cluster. It is not used and nothing of it is touched (its virtual node, proxies and "+
		"delegates stay as they are) until `flotillactl cluster join --secondary-context <its context> --name %s` pins the cluster "+
		"that answers now (registered context %s)", name, answered, pinned, name, contextName)
}

// identityChanged says whether the cluster answers with another identity than its pinned one.
func (c *cluster) identityChanged() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.Reason == flotillav1.ReasonIdentityChanged
}

// missingFeatures reads the cluster's discovery with its version, so a cluster upgraded in place
// says what it serves now: the Features it lacks, empty (not nil) for none; nil when the read
// failed, which keeps what was known (the next identify reads again).
func (c *cluster) missingFeatures(log logr.Logger) []string {
	missing, err := MissingFeatures(c.client.Discovery())
	if err != nil {
		log.V(logging.Debug).Info("Cannot read the cluster's discovery", "error", err.Error())
		return nil
	}
	if missing == nil {
		missing = []string{}
	}
	return missing
}

// identify reads the cluster's kube-system UID, version and missing features (missingFeatures).
func (c *cluster) identify(ctx context.Context, log logr.Logger) (id, version string, missing []string, err error) {
	ns, err := c.client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return "", "", nil, fmt.Errorf("reading the kube-system namespace: %w", err)
	}
	v, err := c.client.Discovery().ServerVersion()
	if err != nil {
		return "", "", nil, fmt.Errorf("reading the server version: %w", err)
	}
	return string(ns.UID), v.GitVersion, c.missingFeatures(log), nil
}

// takeCapacityDueForRelist takes away the capacity watch when it refused pods for lack of room and
// is due to list them again (relistDue): the next one lists them, and what this one knew serves
// until it syncs (lastCapacity). Nil when there is none to take. c.mu is held.
func (c *cluster) takeCapacityDueForRelist(now time.Time) *capacityWatch {
	cw := c.capacity
	if cw == nil || !cw.relistDue(now) {
		return nil
	}
	if last, synced := cw.current(); synced {
		c.lastCapacity = &last
	}
	c.capacity = nil
	return cw
}

// settleRole decides primary, secondary or duplicate once the cluster's ID is known, and for a
// secondary starts the capacity informers and ensures its FlotillaPrimary.
func (c *cluster) settleRole(ctx context.Context, log logr.Logger, id string, timeout time.Duration) {
	reg := c.registry
	role := RoleSecondary
	reason, message := "", ""
	if id == reg.opts.PrimaryID {
		role = RolePrimary
	} else if owner := reg.claim(id, c.name); owner != c.name {
		reason = flotillav1.ReasonDuplicateCluster
		message = fmt.Sprintf("Same cluster (kube-system UID %s) as the one registered as %s", id, owner)
	}
	c.mu.Lock()
	c.state.Role = role
	if reason != "" {
		c.state.Status, c.state.Reason, c.state.Message = flotillav1.ClusterUnknown, reason, message
	}
	secondary := role == RoleSecondary && reason == ""
	var relist *capacityWatch
	if secondary {
		relist = c.takeCapacityDueForRelist(time.Now())
	}
	needCapacity := secondary && c.capacity == nil
	// The delegates' informers feed the leader's reconcilers only: a standby keeps none (its
	// memory stays flat however many delegates there are). A replica that becomes leader starts
	// them at its next probe, and their first sync re-checks every proxy bound here.
	needRemote := secondary && c.remote == nil && reg.isLeader()
	c.mu.Unlock()
	if relist != nil {
		log.Info("Listing the secondary's pods again: its capacity watch refused pods for lack of room")
		relist.stop()
	}
	if !secondary {
		return
	}
	if needCapacity {
		cw := startCapacityWatch(ctx, log, c.client, reg.opts.PrimaryID, func() { reg.notify(c.name) })
		c.mu.Lock()
		c.capacity = cw
		c.mu.Unlock()
	}
	if needRemote {
		c.startRemoteWatch(ctx)
	}
	c.readAllowance(ctx, log, timeout)
	c.mu.Lock()
	c.probesSinceOwnerCheck++
	due := c.state.OwnerMessage != "" || !c.ownerChecked || c.probesSinceOwnerCheck >= ownerRecheckProbes
	c.mu.Unlock()
	if !due {
		return
	}
	// Bounded like a probe: the cluster may hang right now, and the probe loop must go on.
	octx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	msg := ""
	if err := c.ensureOwner(octx); err != nil {
		msg = err.Error()
	}
	c.mu.Lock()
	c.state.OwnerMessage = msg
	c.ownerChecked, c.probesSinceOwnerCheck = true, 0
	c.mu.Unlock()
}

// startRemoteWatch starts the secondary's informers of every declared Watch and feeds them to
// the started sources.
func (c *cluster) startRemoteWatch(ctx context.Context) {
	reg := c.registry
	var rw *remoteWatch
	rw = startRemoteWatch(ctx, c.watcher, reg.opts.PrimaryID, func(watch string) {
		if c.remoteWatch() == rw {
			reg.notifyKind(sinkWatchStarts, watch, c.name)
		}
	})
	c.mu.Lock()
	c.remote = rw
	c.mu.Unlock()
	for _, w := range reg.declared() {
		if _, err := rw.ensure(w); err != nil {
			reg.log.Error(err, "Cannot watch a secondary", "cluster", c.name, "watch", w.Name)
		}
	}
	for _, s := range reg.objectSinks() {
		rw.attach(s)
	}
}

// allowanceRereadProbes is how many good probes pass between two reads of the PrimaryAllowance:
// an admin's edit shows on the virtual node within a few probes (one small get per cluster).
const allowanceRereadProbes = 3

// readAllowance reads, every allowanceRereadProbes good probes, the most the secondary lends this
// primary (its PrimaryAllowance, which the identity may get by name and nothing more), and
// announces a change. Missing, or not readable (a join from before allowances), it lends without
// limit; any other failure keeps what was read last.
func (c *cluster) readAllowance(ctx context.Context, log logr.Logger, timeout time.Duration) {
	c.mu.Lock()
	c.probesSinceAllowanceRead++
	due := !c.allowanceRead || c.probesSinceAllowanceRead >= allowanceRereadProbes
	c.mu.Unlock()
	if !due {
		return
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var a flotillav1.PrimaryAllowance
	var hard, used corev1.ResourceList
	switch err := c.ctrl.Get(actx, client.ObjectKey{Name: c.registry.opts.PrimaryID}, &a); {
	case err == nil:
		hard, used = a.Spec.Hard, a.Status.Used
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || meta.IsNoMatchError(err):
	default:
		log.V(1).Info("Cannot read what the secondary lends this primary; keeping what was read last", "error", err.Error())
		return
	}
	c.mu.Lock()
	changed := !equality.Semantic.DeepEqual(c.state.Allowance, hard) || !equality.Semantic.DeepEqual(c.state.AllowanceUsed, used)
	c.state.Allowance, c.state.AllowanceUsed = hard, used
	c.allowanceRead, c.probesSinceAllowanceRead = true, 0
	c.mu.Unlock()
	if changed {
		log.V(1).Info("The secondary lends this primary", "allowance", fmt.Sprint(hard), "used", fmt.Sprint(used))
		c.registry.notify(c.name)
	}
}

// ownerRecheckProbes is how many good probes pass between two checks that the FlotillaPrimary still exists.
const ownerRecheckProbes = 30

// ensureOwner creates the FlotillaPrimary named by the primary ID in the secondary when missing.
func (c *cluster) ensureOwner(ctx context.Context) error {
	id := c.registry.opts.PrimaryID
	var fp flotillav1.FlotillaPrimary
	err := c.ctrl.Get(ctx, client.ObjectKey{Name: id}, &fp)
	switch {
	case err == nil:
		c.setOwnerUID(string(fp.UID))
		return nil
	case meta.IsNoMatchError(err):
		return errors.New("the FlotillaPrimary CRD is not installed there: register it with `flotillactl cluster join` or install the chart's secondary role")
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading FlotillaPrimary %s: %w", id, err)
	}
	fp = flotillav1.FlotillaPrimary{
		ObjectMeta: metav1.ObjectMeta{Name: id},
		Spec:       flotillav1.FlotillaPrimarySpec{ClusterName: c.name},
	}
	if err := c.ctrl.Create(ctx, &fp); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil // the next check reads its UID
		}
		return fmt.Errorf("creating FlotillaPrimary %s: %w", id, err)
	}
	c.setOwnerUID(string(fp.UID))
	return nil
}

// setOwnerUID records the UID of this primary's FlotillaPrimary there: delegates and copies are
// owned by it, and one that names a deleted owner would be garbage-collected at once.
func (c *cluster) setOwnerUID(uid string) {
	c.mu.Lock()
	c.ownerUID = uid
	c.mu.Unlock()
}

// probeFailure turns a probe error into a reason and a short message (never a credential: client-go
// errors carry URLs and status text, not headers).
// A refused token that has expired says so, and how to recover: the manager renews a token at a
// fraction of its life through the cluster itself, which an outage longer than the rest of its
// life prevents, and only the cluster's admin can mint a new one.
func probeFailure(err error, token string, now time.Time) (reason, message string) {
	if apierrors.IsUnauthorized(err) {
		if exp, _ := TokenExpiry(token); exp != nil && !now.Before(*exp) {
			return flotillav1.ReasonTokenExpired, fmt.Sprintf("The registered token expired at %s (it is renewed through the cluster itself, "+
				"which did not answer before then); with that cluster's admin credentials, run `flotillactl cluster join` for it again",
				exp.Format(time.RFC3339))
		}
	}
	if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
		return flotillav1.ReasonUnauthorized, "The cluster refused the registered credentials: " + shorten(err.Error())
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return flotillav1.ReasonProbeFailed, "No answer within the probe timeout"
	}
	return flotillav1.ReasonProbeFailed, shorten(err.Error())
}

// connectionLost says whether err is a refused or reset connection: the server is not there.
func connectionLost(err error) bool {
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err)
}

func shorten(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}
