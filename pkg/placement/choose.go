package placement

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// Scheduling selects the taints that keep pods off a node (NoSchedule, NoExecute).
func Scheduling(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// MaxClusterWeight is the largest weight flotilla.dev/cluster-weights may give a cluster.
const MaxClusterWeight = 1000

// Cluster is what choosing among clusters reads of one: its name and its virtual node's labels.
type Cluster struct {
	Name   string
	Labels map[string]string
}

// Weights parses a pod's flotilla.dev/cluster-weights (nil without it) over the known clusters.
// It refuses a malformed entry, a weight out of range, an unknown cluster, and no positive weight.
func Weights(pod *corev1.Pod, known []string) (map[string]int64, error) {
	raw, ok := pod.Annotations[flotillav1.AnnotationClusterWeights]
	if !ok {
		return nil, nil
	}
	isKnown := map[string]bool{}
	for _, n := range known {
		isKnown[n] = true
	}
	weights := map[string]int64{}
	var total int64
	for entry := range strings.SplitSeq(raw, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, value, found := strings.Cut(entry, "=")
		name = strings.TrimSpace(name)
		w, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if !found || name == "" || err != nil || w < 0 || w > MaxClusterWeight {
			return nil, fmt.Errorf("annotation %s: %q is not <cluster>=<weight 0-%d> (e.g. east=70,west=30)",
				flotillav1.AnnotationClusterWeights, entry, MaxClusterWeight)
		}
		if !isKnown[name] {
			names := append([]string(nil), known...)
			sort.Strings(names)
			return nil, fmt.Errorf("annotation %s names unknown cluster %s (registered: %s)", flotillav1.AnnotationClusterWeights,
				name, strings.Join(names, ", "))
		}
		weights[name] = w
		total += w
	}
	if total == 0 {
		return nil, errors.New("annotation " + flotillav1.AnnotationClusterWeights + " gives no cluster a positive weight")
	}
	return weights, nil
}

// Chosen applies a pod's flotilla.dev/clusters, its weights (a cluster of weight 0 takes none), its
// node selector on the virtual nodes' labels and flotilla.dev/cluster-selector to the clusters: the
// ones it may go to. An unknown name in
// flotilla.dev/clusters, or a selector that does not parse, is refused.
func Chosen(pod *corev1.Pod, clusters []Cluster, weights map[string]int64) (map[string]bool, error) {
	chosen := map[string]bool{}
	for _, c := range clusters {
		chosen[c.Name] = true
	}
	if list, ok := pod.Annotations[flotillav1.AnnotationClusters]; ok {
		named := map[string]bool{}
		var unknown []string
		for n := range strings.SplitSeq(list, ",") {
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
			return nil, fmt.Errorf("annotation %s names unknown cluster(s) %s (registered: %s)", flotillav1.AnnotationClusters,
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
	bySelector(chosen, pod.Spec.NodeSelector, clusters)
	if expr, ok := pod.Annotations[flotillav1.AnnotationClusterSelector]; ok {
		sel, err := labels.Parse(expr)
		if err != nil {
			return nil, fmt.Errorf("annotation %s is not a label selector: %w", flotillav1.AnnotationClusterSelector, err)
		}
		for _, c := range clusters {
			if chosen[c.Name] && !sel.Matches(labels.Set(c.Labels)) {
				delete(chosen, c.Name)
			}
		}
	}
	return chosen, nil
}

// bySelector keeps, of the chosen clusters, those a node selector on the virtual nodes' labels
// matches (flotilla.dev/cluster: eu-1, as Kueue writes a flavor's node labels): it chooses
// clusters as it would choose nodes. Its other keys are the delegate's.
func bySelector(chosen map[string]bool, selector map[string]string, clusters []Cluster) {
	for k, v := range selector {
		if !OfVirtualNodes(k) {
			continue
		}
		for _, c := range clusters {
			if chosen[c.Name] && c.Labels[k] != v {
				delete(chosen, c.Name)
			}
		}
	}
}

// AcrossClusters says whether a spread constraint is over clusters: its key is one only virtual
// nodes carry.
func AcrossClusters(t corev1.TopologySpreadConstraint) bool {
	return strings.HasPrefix(t.TopologyKey, "flotilla.dev/")
}

// ClusterSpread keeps the constraints over clusters, for the proxy.
func ClusterSpread(list []corev1.TopologySpreadConstraint) []corev1.TopologySpreadConstraint {
	var out []corev1.TopologySpreadConstraint
	for _, t := range list {
		if AcrossClusters(t) {
			out = append(out, *t.DeepCopy())
		}
	}
	return out
}

// ClusterWeights parses flotilla.dev/cluster-weights (nil without it). It refuses what it cannot
// honour: a malformed entry, a weight out of range, an unknown cluster, no positive weight, or a
// spread over clusters beside it (the two would contradict each other).
func ClusterWeights(pod *corev1.Pod, clusters []ClusterView) (map[string]int64, error) {
	if _, ok := pod.Annotations[flotillav1.AnnotationClusterWeights]; !ok {
		return nil, nil
	}
	if len(ClusterSpread(pod.Spec.TopologySpreadConstraints)) > 0 {
		return nil, Rejectf("annotation %s cannot be combined with a topologySpreadConstraint over clusters (flotilla.dev/ keys): use one or the other",
			flotillav1.AnnotationClusterWeights)
	}
	known := make([]string, 0, len(clusters))
	for _, c := range clusters {
		known = append(known, c.Name)
	}
	weights, err := Weights(pod, known)
	if err != nil {
		return nil, Rejectf("%s", err.Error())
	}
	return weights, nil
}
