package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// ClusterView is what the webhook knows of one secondary: its health, its virtual node's labels
// (the flotilla.dev/* keys a cluster selector matches) and its eligible nodes.
type ClusterView struct {
	Name   string
	Ready  bool
	Reason string
	Labels map[string]string
	Nodes  []NodeView
	// Cordoned and Taints are the cluster's virtual node's in the primary: a user's `kubectl
	// cordon` of it, or a NoSchedule taint a proxy does not tolerate, keeps new pods away as they
	// keep them from any node.
	Cordoned bool
	Taints   []corev1.Taint
	// Siblings counts the proxies of the pod's own controller (its ReplicaSet, StatefulSet, Job)
	// the cluster already holds or was just given: Mutate places a workload's next replica among
	// the clusters with the fewest, so replicas spread as the primary's scheduler would spread
	// them over nodes.
	Siblings int
}

// NodeView is one eligible node of a secondary with the resources still free on it.
type NodeView struct {
	Name   string
	Labels map[string]string
	Taints []corev1.Taint
	Free   corev1.ResourceList
}

// Options change what is elected.
type Options struct {
	// AcceptAdmiralty makes multicluster.admiralty.io/elect elect too.
	AcceptAdmiralty bool
	// Choose, when set, binds the proxy at admission: it gets one index of weights (the free CPU
	// of the feasible clusters holding the fewest siblings) and the proxy's nodeName is that
	// cluster's virtual node. Nil leaves the choice among the feasible clusters to the primary's
	// scheduler.
	Choose func(weights []int64) int
}

// Rejection is an elected pod Flotilla cannot honour; its message says why.
type Rejection struct{ Message string }

func (r *Rejection) Error() string { return r.Message }

func reject(format string, args ...any) *Rejection {
	return &Rejection{Message: fmt.Sprintf(format, args...)}
}

// Elected says whether a pod asks to be elected.
func Elected(pod *corev1.Pod, opts Options) bool {
	if _, ok := pod.Labels[flotillav1.LabelPrimary]; ok {
		return false // a delegate of another primary (or of this one, in a cluster that is both)
	}
	if _, ok := pod.Annotations[flotillav1.AnnotationElect]; ok {
		return true
	}
	_, ok := pod.Annotations[flotillav1.AnnotationAdmiraltyElect]
	return ok && opts.AcceptAdmiralty
}

// Admit is the whole admission decision for a pod in a namespace with the given labels: an
// elected pod whose delegate the namespace's Pod Security level would refuse is refused (the
// primary's own admission sees only the proxy, without host networking or host ports), else it
// becomes a proxy (Mutate). Pure: the fuzz test drives it.
func Admit(pod *corev1.Pod, namespaceLabels map[string]string, clusters []ClusterView, opts Options) (*corev1.Pod, error) {
	if !Elected(pod, opts) {
		return pod, nil
	}
	if v := translate.PodSecurityViolation(&pod.ObjectMeta, &pod.Spec, namespaceLabels); v != "" {
		return nil, reject("flotilla cannot elect this pod: its delegate would run as written and %s (the level of namespace %s)", v, pod.Namespace)
	}
	return Mutate(pod, clusters, opts)
}

// Mutate turns an elected pod into a proxy: feasible clusters as a required node affinity on
// flotilla.dev/cluster, the user's constraints moved to an annotation for the delegate, the
// tolerations a proxy needs, host networking stripped, the proxy label and the delegate finalizer.
// It returns a *Rejection when the pod cannot be offloaded, no cluster fits, or it already
// carries what only Flotilla sets: nothing of a proxy is ever taken from the request (the webhook
// runs once per CREATE, reinvocationPolicy Never, so a pod arriving with a proxy's label or
// constraints was not made by it).
func Mutate(pod *corev1.Pod, clusters []ClusterView, opts Options) (*corev1.Pod, error) {
	if !Elected(pod, opts) {
		return pod, nil
	}
	if err := notForged(pod); err != nil {
		return nil, err
	}
	if err := offloadable(pod); err != nil {
		return nil, err
	}
	failover, err := failoverSeconds(pod)
	if err != nil {
		return nil, err
	}
	weights, err := clusterWeights(pod, clusters)
	if err != nil {
		return nil, err
	}
	constraints := constraintsOf(pod)
	place, err := placeable(pod, constraints, clusters, weights)
	if err != nil {
		return nil, err
	}
	feasible := place.feasible
	raw, err := json.Marshal(constraints)
	if err != nil {
		return nil, fmt.Errorf("encoding the delegate constraints: %w", err)
	}

	out := pod.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Labels[flotillav1.LabelProxy] = "true"
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[flotillav1.AnnotationDelegateConstraints] = string(raw)
	if !hasString(out.Finalizers, flotillav1.FinalizerDelegate) {
		out.Finalizers = append(out.Finalizers, flotillav1.FinalizerDelegate)
	}
	out.Spec.NodeSelector = nil
	// Spreads across clusters stay on the proxy, for the primary's scheduler (below).
	out.Spec.TopologySpreadConstraints = clusterSpread(pod.Spec.TopologySpreadConstraints)
	// Where it may go: the clusters that fit now, else those where it could fit once room appears.
	// The primary's scheduler holds a proxy no cluster takes yet Pending (Unschedulable) until a
	// virtual node has room again, as it would hold any pod.
	// Only ever the webhook's own.
	delete(out.Annotations, flotillav1.AnnotationNoClusterFits)
	delete(out.Annotations, AnnotationAdmittedBy)
	values := feasible
	switch {
	case len(feasible) == 0 && len(place.waiting) > 0:
		// Only room or readiness is missing: the primary's scheduler binds it to one of these once
		// its virtual node has room again.
		values = place.waiting
		out.Annotations[flotillav1.AnnotationNoClusterFits] = place.why
	case len(feasible) == 0:
		// No cluster can take it as things are (no node matches its selectors, tolerations): it
		// stays unbound behind a scheduling gate, with no cluster in its affinity, until the proxy
		// reconciler finds one that fits (Refit) and lets it go there. Bound anywhere, its delegate
		// would stay Pending in a cluster that never fits it.
		values = nil
		out.Annotations[flotillav1.AnnotationNoClusterFits] = place.why
		out.Spec.SchedulingGates = append(out.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: flotillav1.SchedulingGatePlacement})
	case len(out.Spec.TopologySpreadConstraints) > 0:
		// Left to the primary's scheduler to spread: the clusters that are only away or full now
		// stay in its choice, so that a cluster whose capacity is not known yet (one just joined)
		// does not drop out of a workload's spread for good.
		values = append(append([]string(nil), feasible...), place.waiting...)
		sort.Strings(values)
	}
	out.Spec.Affinity = translate.ClusterAffinity(values)
	out.Spec.Tolerations = proxyTolerations(failover)
	// A spread across clusters is left to the primary's scheduler, which counts the proxies on
	// the virtual nodes by the constraint's own selector, as Kubernetes does for any pod.
	if len(feasible) > 0 && bindable(out) && opts.Choose != nil && len(out.Spec.TopologySpreadConstraints) == 0 {
		candidates := fewestSiblings(feasible, clusters)
		if weights != nil {
			candidates = weightedNext(feasible, clusters, weights)
		}
		out.Spec.NodeName = flotillav1.VirtualNodeName(candidates[opts.Choose(freeCPU(candidates, clusters))])
	}
	out.Spec.HostNetwork = false
	stripHostPorts(out.Spec.InitContainers)
	stripHostPorts(out.Spec.Containers)
	return out, nil
}

// bindable says whether the webhook may bind the proxy itself. Why bind at admission: the
// primary's scheduler would only pick one of the feasible virtual nodes (the user's constraints are
// the delegate's, applied by the secondary's scheduler), at the cost of a scheduling cycle and a
// bind call per pod, which at its default client rate (50/s) bounds how fast pods are elected.
// Pods with scheduling gates are left to the scheduler (a bound pod cannot have any).
func bindable(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == "" && len(pod.Spec.SchedulingGates) == 0
}

// fewestSiblings keeps the feasible clusters that hold the fewest of the pod's siblings (all of
// them for a pod without a controller, whose counts are all zero): the spread comes first, free
// capacity only breaks ties. Why not capacity alone: with weights, a 4-replica Deployment over two
// equal clusters lands wholly in one of them one time in eight, and a failover then has nowhere
// left to go but back.
func fewestSiblings(feasible []string, clusters []ClusterView) []string {
	siblings := map[string]int{}
	for _, cl := range clusters {
		siblings[cl.Name] = cl.Siblings
	}
	fewest := -1
	var out []string
	for _, name := range feasible {
		switch n := siblings[name]; {
		case fewest < 0 || n < fewest:
			fewest, out = n, []string{name}
		case n == fewest:
			out = append(out, name)
		}
	}
	return out
}

// freeCPU is each named cluster's free CPU in millicores (at least 1, so every feasible cluster
// can be chosen).
func freeCPU(names []string, clusters []ClusterView) []int64 {
	weights := make([]int64, len(names))
	for i, name := range names {
		weights[i] = 1
		for _, cl := range clusters {
			if cl.Name != name {
				continue
			}
			for _, n := range cl.Nodes {
				if cpu, ok := n.Free[corev1.ResourceCPU]; ok {
					weights[i] += cpu.MilliValue()
				}
			}
		}
	}
	return weights
}

// WeightedRandom picks an index with a probability proportional to its weight: a burst of pods
// admitted before the capacity they take is seen spreads over clusters like their free capacity.
func WeightedRandom(weights []int64) int {
	var total int64
	for _, w := range weights {
		total += w
	}
	if total <= 0 {
		return 0
	}
	r := rand.Int64N(total) //nolint:gosec // placement spread, not security
	for i, w := range weights {
		if r < w {
			return i
		}
		r -= w
	}
	return len(weights) - 1
}

// notForged refuses a pod that arrives with what only Flotilla sets on a proxy: its label,
// finalizer, or annotations (the delegate's constraints, IP, proxy UID). Taken as they are, they
// would let a tenant choose its delegate's host networking, tolerations and node.
func notForged(pod *corev1.Pod) error {
	var found []string
	if _, ok := pod.Labels[flotillav1.LabelProxy]; ok {
		found = append(found, "label "+flotillav1.LabelProxy)
	}
	for _, a := range []string{flotillav1.AnnotationDelegateConstraints, flotillav1.AnnotationDelegateIP, flotillav1.AnnotationProxyUID, flotillav1.AnnotationSeal} {
		if _, ok := pod.Annotations[a]; ok {
			found = append(found, "annotation "+a)
		}
	}
	if hasString(pod.Finalizers, flotillav1.FinalizerDelegate) {
		found = append(found, "finalizer "+flotillav1.FinalizerDelegate)
	}
	if len(found) > 0 {
		return reject("flotilla cannot elect this pod: it carries %s, which only Flotilla sets on the proxies it makes; remove them and create the pod as written",
			strings.Join(found, ", "))
	}
	return nil
}

// offloadable refuses what a delegate cannot have in another cluster (translate.NotOffloadable,
// which the proxy reconciler asks again), and a pod already bound.
func offloadable(pod *corev1.Pod) error {
	problems := translate.NotOffloadable(&pod.Spec)
	if pod.Spec.NodeName != "" {
		problems = append(problems, fmt.Sprintf("it is already bound to node %s", pod.Spec.NodeName))
	}
	if len(problems) > 0 {
		return reject("flotilla cannot elect this pod: %s", strings.Join(problems, "; "))
	}
	return nil
}

// Refit is where a gated proxy (no cluster could take it at admission) may go now: the clusters
// it fits, by the same judgement as at admission, from the constraints the webhook kept for its
// delegate; else why none fits. Pure.
func Refit(proxy *corev1.Pod, clusters []ClusterView) (feasible []string, why string, err error) {
	var c translate.Constraints
	if raw := proxy.Annotations[flotillav1.AnnotationDelegateConstraints]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &c); err != nil {
			return nil, "", fmt.Errorf("annotation %s does not parse: %w", flotillav1.AnnotationDelegateConstraints, err)
		}
	}
	weights, err := clusterWeights(proxy, clusters)
	if err != nil {
		return nil, "", err
	}
	place, err := placeable(proxy, c, clusters, weights)
	if err != nil {
		return nil, "", err
	}
	return place.feasible, place.why, nil
}

func failoverSeconds(pod *corev1.Pod) (int64, error) {
	v, ok := pod.Annotations[flotillav1.AnnotationFailoverSeconds]
	if !ok {
		return flotillav1.DefaultFailoverSeconds, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, reject("annotation %s must be a whole number of seconds, not %q", flotillav1.AnnotationFailoverSeconds, v)
	}
	return n, nil
}

func constraintsOf(pod *corev1.Pod) translate.Constraints {
	c := translate.Constraints{NodeSelector: pod.Spec.NodeSelector, Affinity: pod.Spec.Affinity, HostNetwork: pod.Spec.HostNetwork}
	for _, t := range pod.Spec.TopologySpreadConstraints {
		if !acrossClusters(t) {
			c.TopologySpreadConstraints = append(c.TopologySpreadConstraints, t)
		}
	}
	// Tolerations the DefaultTolerationSeconds plugin (or the user) put there for the primary's own
	// not-ready/unreachable taints are the proxy's business, not the delegate's.
	for _, t := range pod.Spec.Tolerations {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable || t.Key == flotillav1.TaintUnreachable ||
			t.Key == flotillav1.TaintVirtualNode {
			continue
		}
		c.Tolerations = append(c.Tolerations, t)
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, ctr := range list {
			for _, p := range ctr.Ports {
				if p.HostPort != 0 {
					if c.HostPorts == nil {
						c.HostPorts = map[string]int32{}
					}
					c.HostPorts[translate.HostPortKey(ctr.Name, p)] = p.HostPort
				}
			}
		}
	}
	return c
}

func stripHostPorts(containers []corev1.Container) {
	for i := range containers {
		for j := range containers[i].Ports {
			containers[i].Ports[j].HostPort = 0
			containers[i].Ports[j].HostIP = ""
		}
	}
}

func proxyTolerations(failover int64) []corev1.Toleration {
	return []corev1.Toleration{
		{Key: flotillav1.TaintVirtualNode, Operator: corev1.TolerationOpEqual, Value: flotillav1.TaintVirtualNodeValue, Effect: corev1.TaintEffectNoSchedule},
		// Without tolerationSeconds: a dead manager (lease lapsed, node Unknown) never evicts proxies.
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		// Failover: Flotilla taints the node of a secondary that stays unreachable.
		{Key: flotillav1.TaintUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &failover},
	}
}

// placement is where an elected pod may go: the clusters it fits now (feasible), else the
// clusters it could fit once room appears (waiting) and why none fits now.
type placement struct {
	feasible, waiting []string
	why               string
}

// placeable finds the clusters the pod fits now. It refuses only what can never run anywhere: no
// cluster registered or chosen (an unknown name is refused by chosenClusters). The clusters where
// it fails only for want of room or readiness (full nodes, a secondary away, a cordoned virtual
// node) are waiting; a pod that fits no cluster and waits for none is gated by Mutate until one
// fits (its nodes may yet be relabelled or untainted).
func placeable(pod *corev1.Pod, c translate.Constraints, clusters []ClusterView, weights map[string]int64) (placement, error) {
	chosen, err := chosenClusters(pod, clusters, weights)
	if err != nil {
		return placement{}, err
	}
	delegate := pod.DeepCopy()
	delegate.Spec.NodeSelector, delegate.Spec.Affinity, delegate.Spec.Tolerations = c.NodeSelector, c.Affinity, c.Tolerations
	requests := resourcehelper.PodRequests(delegate, resourcehelper.PodResourcesOptions{})
	required := nodeaffinity.GetRequiredNodeAffinity(delegate)
	var p placement
	var why, all []string
	for _, cl := range clusters {
		if !chosen[cl.Name] {
			continue
		}
		all = append(all, cl.Name)
		reason, forNow := clusterMisfit(cl, delegate, requests, required)
		if reason == "" {
			p.feasible = append(p.feasible, cl.Name)
			continue
		}
		why = append(why, fmt.Sprintf("%s: %s", cl.Name, reason))
		if forNow {
			p.waiting = append(p.waiting, cl.Name)
		}
	}
	if len(all) == 0 {
		if len(clusters) == 0 {
			return placement{}, reject("flotilla cannot elect this pod: no secondary cluster is registered")
		}
		return placement{}, reject("flotilla cannot elect this pod: annotation %s matches no registered cluster", flotillav1.AnnotationClusterSelector)
	}
	sort.Strings(p.feasible)
	sort.Strings(p.waiting)
	if len(p.feasible) == 0 {
		sort.Strings(why)
		p.why = "no cluster fits now: " + strings.Join(why, "; ")
	}
	return p, nil
}

// chosenClusters applies flotilla.dev/clusters, flotilla.dev/cluster-weights (parsed by
// clusterWeights: a cluster of weight 0 takes none) and flotilla.dev/cluster-selector.
func chosenClusters(pod *corev1.Pod, clusters []ClusterView, weights map[string]int64) (map[string]bool, error) {
	chosen := map[string]bool{}
	for _, c := range clusters {
		chosen[c.Name] = true
	}
	if list, ok := pod.Annotations[flotillav1.AnnotationClusters]; ok {
		named := map[string]bool{}
		var unknown []string
		for _, n := range strings.Split(list, ",") {
			n = strings.TrimSpace(n)
			if n == "" {
				continue
			}
			if !chosen[n] {
				unknown = append(unknown, n)
			}
			named[n] = true
		}
		if len(unknown) > 0 {
			known := make([]string, 0, len(clusters))
			for _, c := range clusters {
				known = append(known, c.Name)
			}
			sort.Strings(known)
			return nil, reject("annotation %s names unknown cluster(s) %s (registered: %s)", flotillav1.AnnotationClusters,
				strings.Join(unknown, ", "), strings.Join(known, ", "))
		}
		chosen = named
	}
	if weights != nil {
		for name := range chosen {
			if weights[name] == 0 {
				delete(chosen, name)
			}
		}
	}
	if expr, ok := pod.Annotations[flotillav1.AnnotationClusterSelector]; ok {
		sel, err := labels.Parse(expr)
		if err != nil {
			return nil, reject("annotation %s is not a label selector: %v", flotillav1.AnnotationClusterSelector, err)
		}
		for _, c := range clusters {
			if chosen[c.Name] && !sel.Matches(labels.Set(c.Labels)) {
				delete(chosen, c.Name)
			}
		}
	}
	return chosen, nil
}

var errNoNode = errors.New("no eligible node")

// clusterMisfit says why no node of a cluster can take the delegate ("" when one can), and
// whether only for now: the cluster is away, cordoned, or full, rather than without any node the
// delegate's selectors and tolerations allow.
func clusterMisfit(cl ClusterView, delegate *corev1.Pod, requests corev1.ResourceList, required nodeaffinity.RequiredNodeAffinity) (string, bool) {
	if !cl.Ready {
		return fmt.Sprintf("not ready (%s)", cl.Reason), true
	}
	if cl.Cordoned {
		return "its virtual node is cordoned", true
	}
	if t, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), cl.Taints, proxyTolerations(0), scheduling, false); untolerated {
		return fmt.Sprintf("its virtual node has taint %s", t.ToString()), true
	}
	if len(cl.Nodes) == 0 {
		return errNoNode.Error(), true
	}
	var reasons []string
	forNow := false
	for _, n := range cl.Nodes {
		reason, full := nodeMisfit(n, delegate, requests, required)
		if reason == "" {
			return "", false
		}
		forNow = forNow || full
		if len(reasons) < 3 {
			reasons = append(reasons, fmt.Sprintf("node %s %s", n.Name, reason))
		}
	}
	if len(cl.Nodes) > len(reasons) {
		reasons = append(reasons, fmt.Sprintf("and %d more nodes", len(cl.Nodes)-len(reasons)))
	}
	return strings.Join(reasons, ", "), forNow
}

// scheduling selects the taints that keep pods from being scheduled.
func scheduling(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// nodeMisfit says why a node cannot take the delegate ("" when it can), and whether it is only
// full (it would take the delegate once pods there finish).
func nodeMisfit(n NodeView, delegate *corev1.Pod, requests corev1.ResourceList, required nodeaffinity.RequiredNodeAffinity) (string, bool) {
	node := &corev1.Node{}
	node.Name, node.Labels, node.Spec.Taints = n.Name, n.Labels, n.Taints
	if ok, _ := required.Match(node); !ok {
		return "does not match the pod's node selector or affinity", false
	}
	if t, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), n.Taints, delegate.Spec.Tolerations, scheduling, false); untolerated {
		return fmt.Sprintf("has taint %s the pod does not tolerate", t.ToString()), false
	}
	var short []string
	for name, want := range requests {
		if want.IsZero() {
			continue
		}
		free, ok := n.Free[name]
		if !ok || free.Cmp(want) < 0 {
			short = append(short, fmt.Sprintf("%s %s free of %s requested", name, free.String(), want.String()))
		}
	}
	if len(short) > 0 {
		sort.Strings(short)
		return "has only " + strings.Join(short, ", "), true
	}
	return "", false
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
