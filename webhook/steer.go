package webhook

import (
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// A fleet operator steers where a controller's pods go in two ways, besides the even spread every
// controller gets (fewestSiblings):
//   - topologySpreadConstraints on a virtual node label (flotilla.dev/cluster, flotilla.dev/region,
//     flotilla.dev/zone): they stay on the proxy and the primary's scheduler applies them across
//     the virtual nodes, with Kubernetes' own semantics (maxSkew, whenUnsatisfiable, the
//     constraint's selector). Every other constraint (zone, hostname) is the delegate's, applied
//     inside its secondary.
//   - flotilla.dev/cluster-weights: "east=70,west=30" splits the pods in proportion (each one
//     goes where the split is furthest behind).

// maxClusterWeight bounds a weight: a split is a proportion, not a count.
const maxClusterWeight = 1000

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
	raw, ok := pod.Annotations[flotillav1.AnnotationClusterWeights]
	if !ok {
		return nil, nil
	}
	if len(clusterSpread(pod.Spec.TopologySpreadConstraints)) > 0 {
		return nil, reject("annotation %s cannot be combined with a topologySpreadConstraint over clusters (flotilla.dev/ keys): use one or the other",
			flotillav1.AnnotationClusterWeights)
	}
	known := map[string]bool{}
	for _, c := range clusters {
		known[c.Name] = true
	}
	weights := map[string]int64{}
	var total int64
	for _, entry := range strings.Split(raw, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, value, found := strings.Cut(entry, "=")
		name = strings.TrimSpace(name)
		w, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if !found || name == "" || err != nil || w < 0 || w > maxClusterWeight {
			return nil, reject("annotation %s: %q is not <cluster>=<weight 0-%d> (e.g. east=70,west=30)",
				flotillav1.AnnotationClusterWeights, entry, maxClusterWeight)
		}
		if !known[name] {
			names := make([]string, 0, len(known))
			for n := range known {
				names = append(names, n)
			}
			sort.Strings(names)
			return nil, reject("annotation %s names unknown cluster %s (registered: %s)", flotillav1.AnnotationClusterWeights,
				name, strings.Join(names, ", "))
		}
		weights[name] = w
		total += w
	}
	if total == 0 {
		return nil, reject("annotation %s gives no cluster a positive weight", flotillav1.AnnotationClusterWeights)
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
