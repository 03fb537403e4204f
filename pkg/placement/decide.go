package placement

import (
	"context"

	"math/rand/v2"
	"sort"

	corev1 "k8s.io/api/core/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
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

// Fit is which clusters an elected pod fits: those it fits now (Feasible), else those it could
// fit once room appears (Waiting), and why none fits now (Why, "" when one does).
type Fit struct {
	Feasible, Waiting []string
	Why               string
}

// Decision is the whole decision for a proxy: the clusters it fits, those its required node
// affinity names, whether it waits gated, the spread constraints it keeps, and the cluster it is
// bound to at admission.
type Decision struct {
	Fit
	// Affinity are the clusters the proxy's required node affinity names: the feasible ones, else
	// the waiting ones; none for a gated proxy.
	Affinity []string
	// Gated: no cluster can take the pod as things are (no node matches its selectors or
	// tolerates it); the proxy waits unbound behind flotillav1.SchedulingGatePlacement.
	Gated bool
	// Spread are the pod's topology spread constraints over clusters, which stay on the proxy
	// for the primary's scheduler.
	Spread []corev1.TopologySpreadConstraint
	// Cluster is where the webhook binds the proxy ("" leaves the choice to the primary's
	// scheduler).
	Cluster string
}

// Decide places an elected pod whose delegate gets the constraints c. choose, when set,
// picks the cluster the proxy is bound to among the candidates (it gets their free CPU); nil
// leaves the choice among the feasible clusters to the primary's scheduler. It returns a
// *Rejection when no cluster is registered or chosen, or the pod's steering annotations cannot be
// honoured.
func Decide(ctx context.Context, pod *corev1.Pod, c translate.Constraints, clusters []ClusterView, choose func(weights []int64) int) (Decision, error) {
	weights, err := ClusterWeights(pod, clusters)
	if err != nil {
		return Decision{}, err
	}
	_, inGang, err := GangOf(pod)
	if err != nil {
		return Decision{}, err
	}
	fit, err := fitClusters(ctx, pod, c, clusters, weights)
	if err != nil {
		return Decision{}, err
	}
	p := Decision{Fit: fit, Affinity: fit.Feasible, Spread: ClusterSpread(pod.Spec.TopologySpreadConstraints)}
	if inGang {
		// A gang's member waits gated for the whole gang: the proxy reconciler lets every member
		// go at once, to the one cluster that fits them all (PlaceGang).
		p.Affinity, p.Gated, p.Spread = nil, true, nil
		return p, nil
	}
	if _, queued := pod.Labels[flotillav1.LabelKueueQueueName]; queued {
		// A pod Kueue queues waits gated too: once Kueue admits it, its flavor's node labels (a
		// node selector on the virtual nodes' labels) say the cluster, which need not be one that
		// fits now; the proxy reconciler judges it then (Refit). Bound to today's feasible
		// clusters, a flavor naming another would leave it Pending for good.
		p.Affinity, p.Gated = nil, true
		return p, nil
	}
	switch {
	case len(fit.Feasible) == 0 && len(fit.Waiting) > 0:
		// Only room or readiness is missing: the primary's scheduler binds it to one of these once
		// its virtual node has room again, as it would hold any pod Pending (Unschedulable).
		p.Affinity = fit.Waiting
	case len(fit.Feasible) == 0:
		// No cluster can take it as things are: it stays unbound behind a scheduling gate, with no
		// cluster in its affinity, until the proxy reconciler finds one that fits (Refit) and lets
		// it go there. Bound anywhere, its delegate would stay Pending in a cluster that never
		// fits it.
		p.Affinity, p.Gated = nil, true
	case len(p.Spread) > 0:
		// Left to the primary's scheduler to spread: the clusters that are only away or full now
		// stay in its choice, so that a cluster whose capacity is not known yet (one just joined)
		// does not drop out of a workload's spread for good.
		p.Affinity = append(append([]string(nil), fit.Feasible...), fit.Waiting...)
		sort.Strings(p.Affinity)
	}
	// A spread across clusters is left to the primary's scheduler, which counts the proxies on
	// the virtual nodes by the constraint's own selector, as Kubernetes does for any pod.
	if len(fit.Feasible) > 0 && bindable(pod) && choose != nil && len(p.Spread) == 0 {
		candidates := fewestSiblings(fit.Feasible, clusters)
		if weights != nil {
			candidates = WeightedNext(fit.Feasible, clusters, weights)
		}
		p.Cluster = candidates[choose(freeCPU(candidates, clusters))]
	}
	return p, nil
}

// Refit is where a gated proxy (no cluster could take it at admission) may go now: the clusters
// it fits, by the same judgement as at admission, from the constraints the webhook kept for its
// delegate; else why none fits. Pure.
func Refit(ctx context.Context, proxy *corev1.Pod, clusters []ClusterView) (feasible []string, why string, err error) {
	c, err := translate.ConstraintsOf(proxy)
	if err != nil {
		return nil, "", err
	}
	weights, err := ClusterWeights(proxy, clusters)
	if err != nil {
		return nil, "", err
	}
	fit, err := fitClusters(ctx, proxy, c, clusters, weights)
	if err != nil {
		return nil, "", err
	}
	return fit.Feasible, fit.Why, nil
}

// bindable says whether the webhook may bind the proxy itself. Why bind at admission: the
// primary's scheduler would only pick one of the feasible virtual nodes (the user's constraints are
// the delegate's, applied by the secondary's scheduler), at the cost of a scheduling cycle and a
// bind call per pod, which at its default client rate (50/s) bounds how fast pods are elected.
// Pods with scheduling gates are left to the scheduler (a bound pod cannot have any), and so is a
// pod Kueue queues (its queue-name label): Kueue's own webhook gates it after this one ran, and
// the API server refuses a gate on a bound pod; once Kueue admits it, its flavor's node labels
// (a node selector on the virtual nodes' labels) say the cluster, and the scheduler binds it there.
func bindable(pod *corev1.Pod) bool {
	_, queued := pod.Labels[flotillav1.LabelKueueQueueName]
	return pod.Spec.NodeName == "" && len(pod.Spec.SchedulingGates) == 0 && !queued
}

// WeightedNext keeps the feasible clusters where the next pod of the controller does the most for
// the split: the lowest (pods there + ½) / weight, Sainte-Laguë's rule, so that 10 pods at 70/30
// end 7 and 3 whatever order they come in. Clusters of weight 0 are never kept.
func WeightedNext(feasible []string, clusters []ClusterView, weights map[string]int64) []string {
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
