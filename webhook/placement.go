package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	rules "github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// Placement decides where an elected pod's proxy may go and, when the webhook binds it, where it
// goes: pure functions of the pod and the clusters as the webhook sees them (ClusterView).
//
// A fleet operator steers where a controller's pods go in three ways:
//   - flotilla.dev/clusters and flotilla.dev/cluster-selector restrict the clusters (by name, by
//     their virtual node's flotilla.dev/* labels).
//   - topologySpreadConstraints on a virtual node label (flotilla.dev/cluster, flotilla.dev/region,
//     flotilla.dev/zone): they stay on the proxy and the primary's scheduler applies them across
//     the virtual nodes, with Kubernetes' own semantics (maxSkew, whenUnsatisfiable, the
//     constraint's selector). Every other constraint (zone, hostname) is the delegate's, applied
//     inside its secondary.
//   - flotilla.dev/cluster-weights: "east=70,west=30" splits the pods in proportion (each one
//     goes where the split is furthest behind).
//
// Without weights, every controller's pods spread evenly (fewestSiblings), and free CPU breaks
// ties.

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
	// the cluster already holds or was just given: placement puts a workload's next replica among
	// the clusters with the fewest, so replicas spread as the primary's scheduler would spread
	// them over nodes.
	Siblings int
	// NoClaims says the cluster takes no claims of class flotilla (its registration's storage
	// class is none): a pod that uses one does not fit there.
	NoClaims bool
	// UnreachableFor is how long the cluster's virtual node has carried the failover taint (0:
	// it does not): a pod that would rather start afresh than wait for its data there
	// (flotilla.dev/on-volume-cluster-loss: recreate) leaves it once this reaches its failover bound.
	UnreachableFor time.Duration
	// Draining: `flotillactl cluster drain` is moving the cluster's pods away (its virtual node's
	// flotilla.dev/draining): a pod that chose recreate leaves its data there at once.
	Draining bool
}

// unreachableFor is how long a virtual node's failover taint has been there at now (0: none, or
// not stamped).
func unreachableFor(taints []corev1.Taint, now time.Time) time.Duration {
	for _, t := range taints {
		if t.Key == flotillav1.TaintUnreachable && t.Effect == corev1.TaintEffectNoExecute && t.TimeAdded != nil {
			return max(now.Sub(t.TimeAdded.Time), time.Nanosecond)
		}
	}
	return 0
}

// dataLost says whether a pod leaves the cluster that holds its data (dataCluster) for fresh,
// empty claims elsewhere: it asked to (flotilla.dev/on-volume-cluster-loss: recreate) and that
// cluster is being drained, or has been unreachable for the pod's failover bound, the time after
// which its running pods were evicted too.
func dataLost(pod *corev1.Pod, dataCluster string, clusters []ClusterView) bool {
	if !translate.RecreatesOnVolumeClusterLoss(pod) {
		return false
	}
	bound, err := failoverSeconds(pod)
	if err != nil {
		return false
	}
	for _, cl := range clusters {
		if cl.Name == dataCluster {
			return cl.Draining || cl.UnreachableFor > 0 && cl.UnreachableFor >= time.Duration(bound)*time.Second
		}
	}
	return false
}

// NodeView is one eligible node of a secondary with the resources still free on it.
type NodeView struct {
	Name   string
	Labels map[string]string
	Taints []corev1.Taint
	Free   corev1.ResourceList
}

// clusterFit is which clusters an elected pod fits: those it fits now (feasible), else those it
// could fit once room appears (waiting) and why none fits now.
type clusterFit struct {
	feasible, waiting []string
	why               string
}

// placement is the whole decision for a proxy: the clusters it fits, those its required node
// affinity names, whether it waits gated, the spread constraints it keeps, and the cluster it is
// bound to at admission.
type placement struct {
	clusterFit
	// affinity are the clusters the proxy's required node affinity names: the feasible ones, else
	// the waiting ones; none for a gated proxy.
	affinity []string
	// gated: no cluster can take the pod as things are (no node matches its selectors or
	// tolerates it); the proxy waits unbound behind flotillav1.SchedulingGatePlacement.
	gated bool
	// spread are the pod's topology spread constraints over clusters, which stay on the proxy
	// for the primary's scheduler.
	spread []corev1.TopologySpreadConstraint
	// cluster is where the webhook binds the proxy ("" leaves the choice to the primary's
	// scheduler).
	cluster string
}

// decidePlacement places an elected pod whose delegate gets the constraints c. choose, when set,
// picks the cluster the proxy is bound to among the candidates (it gets their free CPU); nil
// leaves the choice among the feasible clusters to the primary's scheduler. It returns a
// *Rejection when no cluster is registered or chosen, or the pod's steering annotations cannot be
// honoured.
func decidePlacement(pod *corev1.Pod, c translate.Constraints, clusters []ClusterView, choose func(weights []int64) int) (placement, error) {
	weights, err := clusterWeights(pod, clusters)
	if err != nil {
		return placement{}, err
	}
	fit, err := fitClusters(pod, c, clusters, weights)
	if err != nil {
		return placement{}, err
	}
	p := placement{clusterFit: fit, affinity: fit.feasible, spread: clusterSpread(pod.Spec.TopologySpreadConstraints)}
	switch {
	case len(fit.feasible) == 0 && len(fit.waiting) > 0:
		// Only room or readiness is missing: the primary's scheduler binds it to one of these once
		// its virtual node has room again, as it would hold any pod Pending (Unschedulable).
		p.affinity = fit.waiting
	case len(fit.feasible) == 0:
		// No cluster can take it as things are: it stays unbound behind a scheduling gate, with no
		// cluster in its affinity, until the proxy reconciler finds one that fits (Refit) and lets
		// it go there. Bound anywhere, its delegate would stay Pending in a cluster that never
		// fits it.
		p.affinity, p.gated = nil, true
	case len(p.spread) > 0:
		// Left to the primary's scheduler to spread: the clusters that are only away or full now
		// stay in its choice, so that a cluster whose capacity is not known yet (one just joined)
		// does not drop out of a workload's spread for good.
		p.affinity = append(append([]string(nil), fit.feasible...), fit.waiting...)
		sort.Strings(p.affinity)
	}
	// A spread across clusters is left to the primary's scheduler, which counts the proxies on
	// the virtual nodes by the constraint's own selector, as Kubernetes does for any pod.
	if len(fit.feasible) > 0 && bindable(pod) && choose != nil && len(p.spread) == 0 {
		candidates := fewestSiblings(fit.feasible, clusters)
		if weights != nil {
			candidates = weightedNext(fit.feasible, clusters, weights)
		}
		p.cluster = candidates[choose(freeCPU(candidates, clusters))]
	}
	return p, nil
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
	fit, err := fitClusters(proxy, c, clusters, weights)
	if err != nil {
		return nil, "", err
	}
	return fit.feasible, fit.why, nil
}

// bindable says whether the webhook may bind the proxy itself. Why bind at admission: the
// primary's scheduler would only pick one of the feasible virtual nodes (the user's constraints are
// the delegate's, applied by the secondary's scheduler), at the cost of a scheduling cycle and a
// bind call per pod, which at its default client rate (50/s) bounds how fast pods are elected.
// Pods with scheduling gates are left to the scheduler (a bound pod cannot have any).
func bindable(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == "" && len(pod.Spec.SchedulingGates) == 0
}

// fitClusters finds the clusters the pod fits now. It refuses only what can never run anywhere:
// no cluster registered or chosen (an unknown name is refused by chosenClusters). The clusters
// where it fails only for want of room or readiness (full nodes, a secondary away, a cordoned
// virtual node) are waiting; a pod that fits no cluster and waits for none is gated until one fits
// (its nodes may yet be relabelled or untainted).
func fitClusters(pod *corev1.Pod, c translate.Constraints, clusters []ClusterView, weights map[string]int64) (clusterFit, error) {
	chosen, err := chosenClusters(pod, clusters, weights)
	if err != nil {
		return clusterFit{}, err
	}
	if c.DataCluster != "" && dataLost(pod, c.DataCluster, clusters) {
		// Its data is out of reach for longer than it would wait: it starts afresh elsewhere.
		delete(chosen, c.DataCluster)
		c.DataCluster, c.DataClaim = "", ""
	}
	if c.DataCluster != "" {
		// The data decides: that cluster or none.
		for name := range chosen {
			if name != c.DataCluster {
				delete(chosen, name)
			}
		}
		if !chosen[c.DataCluster] {
			return clusterFit{why: fmt.Sprintf("the data of claim %s is in cluster %s, which is not registered or not among the clusters this pod may go to", c.DataClaim, c.DataCluster)}, nil
		}
	}
	delegate := pod.DeepCopy()
	delegate.Spec.NodeSelector, delegate.Spec.Affinity, delegate.Spec.Tolerations = c.NodeSelector, c.Affinity, c.Tolerations
	requests := resourcehelper.PodRequests(delegate, resourcehelper.PodResourcesOptions{})
	required := nodeaffinity.GetRequiredNodeAffinity(delegate)
	var fit clusterFit
	var why, all []string
	needsClaims := len(translate.VolumeClaims(pod)) > 0
	for _, cl := range clusters {
		if !chosen[cl.Name] {
			continue
		}
		all = append(all, cl.Name)
		if needsClaims && cl.NoClaims {
			why = append(why, fmt.Sprintf("%s: it takes no claims of class %s (storage class none in its registration)", cl.Name, flotillav1.StorageClassRemote))
			continue
		}
		reason, forNow := clusterMisfit(cl, delegate, requests, required)
		if reason == "" {
			fit.feasible = append(fit.feasible, cl.Name)
			continue
		}
		why = append(why, fmt.Sprintf("%s: %s", cl.Name, reason))
		if forNow {
			fit.waiting = append(fit.waiting, cl.Name)
		}
	}
	if len(all) == 0 {
		if len(clusters) == 0 {
			return clusterFit{}, reject("flotilla cannot elect this pod: no secondary cluster is registered")
		}
		return clusterFit{}, reject("flotilla cannot elect this pod: annotation %s matches no registered cluster", flotillav1.AnnotationClusterSelector)
	}
	sort.Strings(fit.feasible)
	sort.Strings(fit.waiting)
	if len(fit.feasible) == 0 {
		sort.Strings(why)
		fit.why = "no cluster fits now: " + strings.Join(why, "; ")
		if c.DataCluster != "" {
			fit.why = fmt.Sprintf("the data of claim %s is in cluster %s, which cannot take it now: %s", c.DataClaim, c.DataCluster, strings.Join(why, "; "))
			if translate.RecreatesOnVolumeClusterLoss(pod) {
				fit.why += "; with " + flotillav1.AnnotationOnVolumeClusterLoss + ": recreate it starts on fresh claims elsewhere once that cluster has been unreachable for its failover bound"
			}
		}
	}
	return fit, nil
}

// chosenClusters applies flotilla.dev/clusters, flotilla.dev/cluster-weights (parsed by
// clusterWeights: a cluster of weight 0 takes none) and flotilla.dev/cluster-selector.
func chosenClusters(pod *corev1.Pod, clusters []ClusterView, weights map[string]int64) (map[string]bool, error) {
	named := make([]rules.Cluster, 0, len(clusters))
	for _, c := range clusters {
		named = append(named, rules.Cluster{Name: c.Name, Labels: c.Labels})
	}
	chosen, err := rules.Chosen(pod, named, weights)
	if err != nil {
		return nil, reject("%s", err.Error())
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
	if t, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), cl.Taints, proxyTolerations(0), rules.Scheduling, false); untolerated {
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

// nodeMisfit says why a node cannot take the delegate ("" when it can), and whether it is only
// full (it would take the delegate once pods there finish).
func nodeMisfit(n NodeView, delegate *corev1.Pod, requests corev1.ResourceList, required nodeaffinity.RequiredNodeAffinity) (string, bool) {
	node := &corev1.Node{}
	node.Name, node.Labels, node.Spec.Taints = n.Name, n.Labels, n.Taints
	if ok, _ := required.Match(node); !ok {
		return "does not match the pod's node selector or affinity", false
	}
	if t, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), n.Taints, delegate.Spec.Tolerations, rules.Scheduling, false); untolerated {
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

// acrossClusters says whether a spread constraint is over clusters: its key is one only virtual
// nodes carry.
func acrossClusters(t corev1.TopologySpreadConstraint) bool {
	return strings.HasPrefix(t.TopologyKey, "flotilla.dev/")
}

// clusterSpread keeps the constraints over clusters, for the proxy.
func clusterSpread(list []corev1.TopologySpreadConstraint) []corev1.TopologySpreadConstraint {
	var out []corev1.TopologySpreadConstraint
	for _, t := range list {
		if acrossClusters(t) {
			out = append(out, *t.DeepCopy())
		}
	}
	return out
}

// clusterWeights parses flotilla.dev/cluster-weights (nil without it). It refuses what it cannot
// honour: a malformed entry, a weight out of range, an unknown cluster, no positive weight, or a
// spread over clusters beside it (the two would contradict each other).
func clusterWeights(pod *corev1.Pod, clusters []ClusterView) (map[string]int64, error) {
	if _, ok := pod.Annotations[flotillav1.AnnotationClusterWeights]; !ok {
		return nil, nil
	}
	if len(clusterSpread(pod.Spec.TopologySpreadConstraints)) > 0 {
		return nil, reject("annotation %s cannot be combined with a topologySpreadConstraint over clusters (flotilla.dev/ keys): use one or the other",
			flotillav1.AnnotationClusterWeights)
	}
	known := make([]string, 0, len(clusters))
	for _, c := range clusters {
		known = append(known, c.Name)
	}
	weights, err := rules.Weights(pod, known)
	if err != nil {
		return nil, reject("%s", err.Error())
	}
	return weights, nil
}

// weightedNext keeps the feasible clusters where the next pod of the controller does the most for
// the split: the lowest (pods there + ½) / weight, Sainte-Laguë's rule, so that 10 pods at 70/30
// end 7 and 3 whatever order they come in. Clusters of weight 0 are never kept.
func weightedNext(feasible []string, clusters []ClusterView, weights map[string]int64) []string {
	siblings := map[string]int{}
	for _, cl := range clusters {
		siblings[cl.Name] = cl.Siblings
	}
	var out []string
	var bestNum, bestDen int64 = -1, 1
	for _, name := range feasible {
		w := weights[name]
		if w <= 0 {
			continue
		}
		num := int64(2*siblings[name] + 1) // (n + 1/2) / w, doubled: integers only
		switch cmp := num*bestDen - bestNum*w; {
		case bestNum < 0 || cmp < 0:
			bestNum, bestDen, out = num, w, []string{name}
		case cmp == 0:
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return feasible
	}
	return out
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
