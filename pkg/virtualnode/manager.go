package virtualnode

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// Registry is what the virtual nodes read of the cluster registry.
type Registry interface {
	Configured() bool
	Snapshot(name string) (clusters.Snapshot, bool)
	Snapshots() []clusters.Snapshot
	ClusterSource(h handler.EventHandler) source.Source
	Removed(name string) bool
}

// DefaultFailoverAfter is Options.FailoverAfter when zero: the manager's --failover-after default.
const DefaultFailoverAfter = 30 * time.Second

// Options configure the virtual nodes. Zero values take the documented defaults.
type Options struct {
	NodeOptions
	// KubeletPorts are the ports the nodes' kubelet APIs are given, one each (AllocatePorts);
	// NodeOptions.KubeletPort is ignored.
	KubeletPorts PortRange
	// LeaseDurationSeconds of each node's Lease. Default 40.
	LeaseDurationSeconds int32
	// LeaseRenewInterval. Default 5s (well inside a short node-monitor grace period).
	LeaseRenewInterval time.Duration
	// StatusInterval is the shortest time between two capacity-only status writes, and the period
	// of the labels-and-taints reconciliation. Default 10s.
	StatusInterval time.Duration
	// ResyncInterval is how often the set of nodes is compared with the registry. Default 10s.
	ResyncInterval time.Duration
	// FailoverAfter is how long a secondary must stay Unknown before its node gets the
	// flotilla.dev/unreachable:NoExecute taint. Default DefaultFailoverAfter.
	FailoverAfter time.Duration
	// Clock tells the failover hysteresis (default: the real one).
	Clock clock.PassiveClock
}

func (o *Options) defaults() {
	if o.LeaseDurationSeconds == 0 {
		o.LeaseDurationSeconds = 40
	}
	if o.LeaseRenewInterval == 0 {
		o.LeaseRenewInterval = 5 * time.Second
	}
	if o.StatusInterval == 0 {
		o.StatusInterval = 10 * time.Second
	}
	if o.ResyncInterval == 0 {
		o.ResyncInterval = 10 * time.Second
	}
	if o.FailoverAfter == 0 {
		o.FailoverAfter = DefaultFailoverAfter
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
}

// Manager keeps one virtual node per usable secondary and deletes the nodes of clusters that
// are no longer registered. It is a manager.Runnable that runs on the leader.
type Manager struct {
	registry Registry
	client   kubernetes.Interface
	opts     Options
	log      logr.Logger

	mu          sync.Mutex
	nodes       map[string]*supervisor
	ports       map[string]int32 // the kubelet port of each running supervisor's node
	unreachable map[string]bool  // secondaries whose node carries the failover taint
}

var _ manager.Runnable = (*Manager)(nil)

// NewManager returns a Manager; add it to the controller-runtime manager.
func NewManager(reg Registry, primary kubernetes.Interface, opts Options, log logr.Logger) *Manager {
	opts.defaults()
	return &Manager{registry: reg, client: primary, opts: opts, log: log, nodes: map[string]*supervisor{}, ports: map[string]int32{}}
}

// NeedLeaderElection says yes: one replica writes the nodes.
func (m *Manager) NeedLeaderElection() bool { return true }

// Start runs until ctx ends; then the supervisors stop and the nodes stay (their Leases lapse).
func (m *Manager) Start(ctx context.Context) error {
	changes, err := m.clusterChanges(ctx)
	if err != nil {
		return err
	}
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		return m.registry.Configured(), nil
	}); err != nil {
		return nil // stopped before the registration was read
	}
	m.loadTainted(ctx)
	ticker := time.NewTicker(m.opts.ResyncInterval)
	defer ticker.Stop()
	failover := time.NewTicker(time.Second)
	defer failover.Stop()
	m.sync(ctx)
	for {
		select {
		case <-failover.C:
			m.evaluateFailover(m.now())
		case <-ctx.Done():
			m.stopAll()
			return nil
		case name := <-changes:
			m.mu.Lock()
			s, ok := m.nodes[name]
			m.mu.Unlock()
			if ok {
				s.poke()
			}
			m.sync(ctx)
		case <-ticker.C:
			m.sync(ctx)
		}
	}
}

// clusterChanges delivers the names of clusters whose state changed, through the registry's
// source and a work queue of this manager's own: the registry never waits for this loop, and
// names that change while the loop is busy are coalesced, never dropped.
func (m *Manager) clusterChanges(ctx context.Context) (<-chan string, error) {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
		workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: "virtualnode-changes"})
	if err := m.registry.ClusterSource(&handler.EnqueueRequestForObject{}).Start(ctx, q); err != nil {
		q.ShutDown()
		return nil, fmt.Errorf("watching the registry's cluster changes: %w", err)
	}
	out := make(chan string)
	go func() {
		<-ctx.Done()
		q.ShutDown()
	}()
	go func() {
		for {
			req, shutdown := q.Get()
			if shutdown {
				return
			}
			q.Done(req)
			select {
			case out <- req.Name:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// sync starts a supervisor per usable secondary, stops the others, and deletes virtual nodes of
// clusters that are not usable secondaries any more. A new node gets its kubelet port here
// (AllocatePorts over the ports every virtual node advertises): without the list of nodes, no
// new one starts this time, so that no port is given twice.
func (m *Manager) sync(ctx context.Context) {
	want := map[string]bool{}
	for _, s := range m.registry.Snapshots() {
		if s.UsableSecondary() {
			want[s.Name] = true
		}
	}
	list, err := m.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: flotillav1.LabelCluster + ",type=virtual-kubelet"})
	if err != nil {
		m.log.Error(err, "Listing virtual nodes failed")
	}
	m.mu.Lock()
	if err == nil {
		m.startSupervisors(ctx, want, list.Items)
	}
	var stop []*supervisor
	for name, sup := range m.nodes {
		if !want[name] {
			stop = append(stop, sup)
			delete(m.nodes, name)
			delete(m.ports, name)
		}
	}
	m.mu.Unlock()
	for _, sup := range stop {
		sup.stopAndWait()
	}
	if err == nil {
		m.deleteStaleNodes(ctx, want, list.Items)
	}
}

// startSupervisors starts a supervisor for each wanted secondary that has none, its node on the
// kubelet port allocated to it. The caller holds m.mu.
func (m *Manager) startSupervisors(ctx context.Context, want map[string]bool, nodes []corev1.Node) {
	held := AdvertisedPorts(nodes)
	var start []string
	for name := range want {
		if _, ok := m.nodes[name]; !ok {
			start = append(start, flotillav1.VirtualNodeName(name))
		}
	}
	if len(start) == 0 {
		return
	}
	for name, p := range m.ports { // what this leader gave, written to the node or about to be
		held[flotillav1.VirtualNodeName(name)] = p
	}
	ports := AllocatePorts(held, start, m.opts.KubeletPorts)
	for _, nodeName := range start {
		name, _ := flotillav1.ClusterOfNode(nodeName)
		opts := m.opts.NodeOptions
		opts.KubeletPort = ports[nodeName]
		if opts.KubeletPort == 0 && m.opts.KubeletPorts.Count > 0 {
			m.log.Error(nil, "No kubelet port left for a virtual node: it serves no kubelet API (kubectl logs, exec, metrics) until one is free; widen --kubelet-port-count",
				"node", nodeName, "first", m.opts.KubeletPorts.First, "count", m.opts.KubeletPorts.Count)
		}
		sup := newSupervisor(m, name, opts)
		sctx, cancel := context.WithCancel(ctx)
		sup.cancel = cancel
		m.nodes[name] = sup
		m.ports[name] = opts.KubeletPort
		go sup.run(sctx)
	}
}

// evaluateFailover decides which nodes carry the failover taint and pokes the supervisors of
// those whose decision changed.
func (m *Manager) evaluateFailover(now time.Time) {
	snaps := m.registry.Snapshots()
	want := Unreachable(snaps, now, m.opts.FailoverAfter)
	m.mu.Lock()
	want = KeepTainted(want, m.unreachable, snaps)
	var changed []*supervisor
	for name, sup := range m.nodes {
		if want[name] != m.unreachable[name] {
			changed = append(changed, sup)
		}
	}
	m.unreachable = want
	m.mu.Unlock()
	for _, sup := range changed {
		m.log.Info("Failover taint changes", "cluster", sup.name, "tainted", want[sup.name])
		sup.respec()
	}
}

// loadTainted remembers which virtual nodes already carry the failover taint (set by an earlier
// run), so that it stays until their secondary answers (KeepTainted).
func (m *Manager) loadTainted(ctx context.Context) {
	list, err := m.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: flotillav1.LabelCluster + ",type=virtual-kubelet"})
	if err != nil {
		m.log.Error(err, "Listing virtual nodes failed; failover taints are judged anew")
		return
	}
	failover := FailoverTaint()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unreachable == nil {
		m.unreachable = map[string]bool{}
	}
	for _, n := range list.Items {
		if hasTaint(n.Spec.Taints, failover) {
			m.unreachable[n.Labels[flotillav1.LabelCluster]] = true
		}
	}
}

func (m *Manager) isUnreachable(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.unreachable[name]
}

// deleteStaleNodes removes Flotilla's virtual nodes of clusters removed with `flotillactl cluster
// remove` (also those left by an earlier run of the manager). Their Leases are owned by the nodes and go with them.
func (m *Manager) deleteStaleNodes(ctx context.Context, want map[string]bool, nodes []corev1.Node) {
	for _, n := range nodes {
		// Only a cluster removed on purpose loses its node: one the manager does not know (yet),
		// or whose context vanished, keeps it with its proxies.
		if cluster := n.Labels[flotillav1.LabelCluster]; want[cluster] || !m.registry.Removed(cluster) {
			continue
		}
		err := m.client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			m.log.Error(err, "Deleting a virtual node failed", "node", n.Name)
			continue
		}
		m.log.Info("Virtual node deleted", "node", n.Name, "cluster", n.Labels[flotillav1.LabelCluster])
	}
}

func (m *Manager) stopAll() {
	m.mu.Lock()
	all := make([]*supervisor, 0, len(m.nodes))
	for name, s := range m.nodes {
		all = append(all, s)
		delete(m.nodes, name)
		delete(m.ports, name)
	}
	m.mu.Unlock()
	for _, s := range all {
		s.stopAndWait()
	}
}

// supervisor runs virtual-kubelet's node controller for one secondary and restarts it with
// backoff when it exits.
type supervisor struct {
	m    *Manager
	name string
	// opts are the node's own: the manager's, with its kubelet port.
	opts NodeOptions
	log  logr.Logger
	// pokeCh says the registry's view of the secondary changed (its status may follow);
	// respecCh that the failover taint changed (the node's spec follows).
	pokeCh, respecCh chan struct{}
	cancel           context.CancelFunc
	done             chan struct{}
}

func newSupervisor(m *Manager, name string, opts NodeOptions) *supervisor {
	return &supervisor{m: m, name: name, opts: opts, log: m.log.WithValues("cluster", name, "node", flotillav1.VirtualNodeName(name)),
		pokeCh: make(chan struct{}, 1), respecCh: make(chan struct{}, 1), done: make(chan struct{})}
}

func (s *supervisor) poke() { notify(s.pokeCh) }

func (s *supervisor) respec() { notify(s.respecCh) }

// notify signals a channel of one slot without blocking: one pending signal stands for many.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (s *supervisor) stopAndWait() {
	s.cancel()
	<-s.done
}

func (s *supervisor) run(ctx context.Context) {
	defer close(s.done)
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 100, Cap: 30 * time.Second}
	for {
		err := s.runOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		delay := backoff.Step()
		s.log.Error(err, "Virtual node controller stopped; restarting", "after", delay.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// runOnce runs one node controller until it fails or ctx ends.
func (s *supervisor) runOnce(ctx context.Context) error {
	snap, ok := s.m.registry.Snapshot(s.name)
	if !ok {
		return fmt.Errorf("cluster %s is not registered", s.name)
	}
	provider := &nodeProvider{}
	nodes := s.m.client.CoreV1().Nodes()
	nc, err := node.NewNodeController(provider, Desired(snap, s.opts), nodes,
		node.WithNodeEnableLeaseV1WithRenewInterval(nodeutil.NodeLeaseV1Client(s.m.client), s.m.opts.LeaseDurationSeconds, s.m.opts.LeaseRenewInterval),
		node.WithNodePingInterval(s.m.opts.LeaseRenewInterval),
		node.WithNodeStatusUpdateInterval(s.m.opts.StatusInterval),
	)
	if err != nil {
		return fmt.Errorf("creating the node controller: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.pushStatus(runCtx, nc, provider, snap)
	if err := nc.Run(runCtx); err != nil {
		return fmt.Errorf("running the node controller: %w", err)
	}
	return ctx.Err()
}

// pushStatus sends the node's status to the node controller when the registry's view changes:
// at once for readiness and labels, at most every StatusInterval for capacity. It also puts back
// labels and taints others removed: it reads the node for that (one GET) every StatusInterval,
// when the failover taint or its labels change, never per change of capacity (a burst of pods
// changes it with each of them).
func (s *supervisor) pushStatus(ctx context.Context, nc *node.NodeController, p *nodeProvider, initial clusters.Snapshot) {
	select {
	case <-ctx.Done():
		return
	case <-nc.Ready():
	}
	s.log.Info("Virtual node running")
	last := Desired(initial, s.opts)
	lastCapacityPush := s.m.now()
	ticker := time.NewTicker(s.m.opts.StatusInterval)
	defer ticker.Stop()
	s.reconcileSpec(ctx, last)
	// deferred fires when a capacity change held back by StatusInterval may be written.
	var deferred <-chan time.Time
	for {
		spec := false
		select {
		case <-ctx.Done():
			return
		case <-s.pokeCh:
		case <-deferred:
			deferred = nil
		case <-s.respecCh:
			spec = true
		case <-ticker.C:
			spec = true
		}
		snap, ok := s.m.registry.Snapshot(s.name)
		if !ok {
			continue
		}
		want := Desired(snap, s.opts)
		c := decideStatusPush(last, want, s.m.now().Sub(lastCapacityPush), s.m.opts.StatusInterval)
		if c.hold > 0 && deferred == nil {
			deferred = time.After(c.hold)
		}
		if c.ready || c.capacity {
			if !p.send(ctx, want) {
				return
			}
			last = want
			if c.capacity {
				lastCapacityPush = s.m.now()
			}
		}
		if spec || c.ready {
			s.reconcileSpec(ctx, want)
		}
	}
}

// statusPush is what pushStatus writes of a wanted node status.
type statusPush struct {
	// ready: readiness, labels or node info changed, written at once.
	ready bool
	// capacity: capacity or allocatable moved by more than 1 %, written now.
	capacity bool
	// hold: such a capacity change must wait this long for StatusInterval (0: none waits).
	hold time.Duration
}

// decideStatusPush compares the last pushed node with the wanted one. A capacity-only change is
// written at most every interval: within it, it waits (on a timer, never by looking again and
// again: that once spun, reading the node, until the interval was over).
func decideStatusPush(last, want *corev1.Node, sinceCapacityPush, interval time.Duration) statusPush {
	out := statusPush{
		ready: !equality.Semantic.DeepEqual(readyOf(last), readyOf(want)) || !equality.Semantic.DeepEqual(last.Labels, want.Labels) ||
			last.Status.NodeInfo != want.Status.NodeInfo,
		capacity: clusters.ChangedMoreThan(last.Status.Capacity, want.Status.Capacity, 0.01) ||
			clusters.ChangedMoreThan(last.Status.Allocatable, want.Status.Allocatable, 0.01),
	}
	if out.capacity && !out.ready && sinceCapacityPush < interval {
		out.capacity, out.hold = false, interval-sinceCapacityPush
	}
	return out
}

func readyOf(n *corev1.Node) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			c.LastHeartbeatTime, c.LastTransitionTime = metav1.Time{}, metav1.Time{}
			return c
		}
	}
	return corev1.NodeCondition{}
}

// reconcileSpec restores the labels and taints Flotilla owns on the node, keeping others' taints,
// and adds or removes the failover taint as the manager decided.
func (s *supervisor) reconcileSpec(ctx context.Context, want *corev1.Node) {
	nodes := s.m.client.CoreV1().Nodes()
	cur, err := nodes.Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error(err, "Reading the virtual node failed")
		}
		return
	}
	labels := labelPatch(cur.Labels, want.Labels)
	annotations := annotationPatch(cur.Annotations, want.Annotations)
	unreachable := s.m.isUnreachable(s.name)
	taints, taintsChanged := taintsFor(cur.Spec.Taints, want.Spec.Taints, unreachable, s.m.now())
	backSince(annotations, cur, unreachable, s.m.now())
	if len(labels) == 0 && len(annotations) == 0 && !taintsChanged {
		return
	}
	patch := map[string]any{"metadata": map[string]any{"resourceVersion": cur.ResourceVersion}}
	if len(labels) > 0 {
		patch["metadata"].(map[string]any)["labels"] = labels
	}
	if len(annotations) > 0 {
		patch["metadata"].(map[string]any)["annotations"] = annotations
	}
	if taintsChanged {
		patch["spec"] = map[string]any{"taints": taints}
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		s.log.Error(err, "Encoding the virtual node patch failed")
		return
	}
	if _, err := nodes.Patch(ctx, want.Name, types.MergePatchType, raw, metav1.PatchOptions{}); err != nil {
		s.log.Error(err, "Restoring the virtual node's labels and taints failed")
		return
	}
	s.log.Info("Reconciled the virtual node's labels, annotations and taints", "labels", len(labels), "annotations", len(annotations),
		"taints", taintsChanged, "unreachable", unreachable)
}

// backSince adds to a virtual node's annotation patch when its secondary came back: the time its
// failover taint is lifted (flotilla.dev/back-since), and that annotation's removal when it is
// tainted again. The rebalancer reads it, so a return outlives a leader change or a restart.
func backSince(patch map[string]*string, cur *corev1.Node, unreachable bool, now time.Time) {
	_, has := cur.Annotations[flotillav1.AnnotationBackSince]
	switch tainted := hasTaint(cur.Spec.Taints, FailoverTaint()); {
	case tainted && !unreachable:
		at := now.UTC().Format(time.RFC3339)
		patch[flotillav1.AnnotationBackSince] = &at
	case unreachable && has:
		patch[flotillav1.AnnotationBackSince] = nil
	}
}

// taintsFor is a virtual node's taints: others' kept, Flotilla's as wanted, the failover taint
// while its secondary is unreachable, stamped with when it was added (now; kept while it stays:
// a pod that would rather start afresh elsewhere than wait for its data measures its failover
// bound from it); and whether that differs from what it has.
func taintsFor(cur, want []corev1.Taint, unreachable bool, now time.Time) ([]corev1.Taint, bool) {
	failover, unregistered := FailoverTaint(), UnregisteredTaint()
	var taints []corev1.Taint
	changed := false
	for _, t := range cur {
		if (t.Key == failover.Key && !unreachable) || (t.Key == unregistered.Key && !hasTaint(want, unregistered)) {
			changed = true
			continue
		}
		taints = append(taints, t)
	}
	if unreachable {
		failover.TimeAdded = &metav1.Time{Time: now}
		want = append(append([]corev1.Taint(nil), want...), failover)
	}
	for _, t := range want {
		if !hasTaint(taints, t) {
			taints = append(taints, t)
			changed = true
		}
	}
	return taints, changed
}

// retiredAnnotations are annotations Flotilla once set on its virtual nodes and removes.
var retiredAnnotations = []string{
	// The path of a node's resource metrics when every virtual node shared one kubelet port.
	AnnotationResourceMetricsPath,
}

// annotationPatch is the merge patch of a virtual node's annotations: what want sets and cur
// lacks or has otherwise, and a removal (nil) for each retired annotation cur still has.
func annotationPatch(cur, want map[string]string) map[string]*string {
	patch := map[string]*string{}
	for k, v := range want {
		if got, ok := cur[k]; !ok || got != v {
			patch[k] = &v
		}
	}
	for _, k := range retiredAnnotations {
		if _, has := cur[k]; has {
			if _, wanted := want[k]; !wanted {
				patch[k] = nil
			}
		}
	}
	return patch
}

// derivedLabels are the labels a virtual node takes from its secondary's nodes, only while they
// all agree: one that stops being agreed on goes.
var derivedLabels = []string{flotillav1.LabelOS, flotillav1.LabelArch, flotillav1.LabelRegion, flotillav1.LabelZone}

// labelPatch is the merge patch of a virtual node's labels: what want sets and cur lacks or has
// otherwise, and a removal (nil) for each derived label cur has and want no longer does. Labels
// of others (a user's, a tool's) are left alone.
func labelPatch(cur, want map[string]string) map[string]*string {
	patch := map[string]*string{}
	for k, v := range want {
		if got, ok := cur[k]; !ok || got != v {
			patch[k] = &v
		}
	}
	for _, k := range derivedLabels {
		if _, has := cur[k]; has {
			if _, wanted := want[k]; !wanted {
				patch[k] = nil
			}
		}
	}
	return patch
}

func hasTaint(list []corev1.Taint, t corev1.Taint) bool {
	for _, have := range list {
		if have.Key == t.Key && have.Effect == t.Effect && have.Value == t.Value {
			return true
		}
	}
	return false
}

// nodeProvider is virtual-kubelet's NodeProvider for a virtual node: Ping always succeeds (it
// stands for the manager being alive), and status comes through send.
type nodeProvider struct {
	mu sync.Mutex
	cb func(*corev1.Node)
}

var _ node.NodeProvider = (*nodeProvider)(nil)

// Ping never dials the secondary: the Lease it keeps fresh means "the manager is alive".
func (p *nodeProvider) Ping(context.Context) error { return nil }

// NotifyNodeStatus stores the node controller's callback.
func (p *nodeProvider) NotifyNodeStatus(_ context.Context, cb func(*corev1.Node)) {
	p.mu.Lock()
	p.cb = cb
	p.mu.Unlock()
}

// send hands a node to the controller. The callback writes to a one-slot channel the controller
// drains, so it is called on its own goroutine and abandoned when ctx ends. It says whether the
// node was handed over.
func (p *nodeProvider) send(ctx context.Context, n *corev1.Node) bool {
	p.mu.Lock()
	cb := p.cb
	p.mu.Unlock()
	if cb == nil {
		return true
	}
	done := make(chan struct{})
	go func() {
		cb(n.DeepCopy())
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

func (m *Manager) now() time.Time { return m.opts.Clock.Now() }
