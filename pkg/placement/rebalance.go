package placement

import (
	"context"

	"fmt"
	"slices"

	"github.com/go-logr/logr"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	corev1 "k8s.io/api/core/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// Rebalance plans the moves that bring one controller's bound, live proxies (proxies; pods of one
// template) to the split placement would choose now (Plan) over the clusters the pod
// fits by the webhook's own judgement (Refit), the clusters they already run in included while
// only room is missing there. A proxy in a cluster that no longer fits it (cordoned, away, left
// its selector) is over its share. A gang's members are never moved. Pure.
func Rebalance(ctx context.Context, proxies []*corev1.Pod, clusters []ClusterView) (Split, error) {
	if len(proxies) == 0 {
		return Split{Have: map[string]int{}, Want: map[string]int{}}, nil
	}
	if _, gang, _ := GangOf(proxies[0]); gang {
		// A gang runs whole in one cluster: moving some of its members would split it. It
		// moves whole, when its cluster fails over.
		return Split{Have: map[string]int{}, Want: map[string]int{}}, nil
	}
	// The template: a pod that may move (one pinned by its data fits its data's cluster only).
	tmpl := proxies[0]
	for _, p := range proxies {
		if !Pinned(p) {
			tmpl = p
			break
		}
	}
	feasible, _, err := Refit(ctx, tmpl, withoutSiblings(clusters))
	if err != nil {
		return Split{}, fmt.Errorf("placing %s/%s: %w", tmpl.Namespace, tmpl.Name, err)
	}
	weights, err := ClusterWeights(tmpl, clusters)
	if err != nil {
		return Split{}, err
	}
	// A proxy uses the capacity of the cluster it runs in: that cluster fits it still.
	for _, p := range proxies {
		if c, ok := flotillav1.ClusterOfNode(p.Spec.NodeName); ok && fitsAnyway(c, feasible, tmpl, clusters) {
			feasible = appendOnce(feasible, c)
		}
	}
	return Plan(proxies, feasible, weights), nil
}

// withoutSiblings is the clusters with no siblings counted: a rebalance judges where the pod fits,
// not where the next one would go.
func withoutSiblings(clusters []ClusterView) []ClusterView {
	out := append([]ClusterView(nil), clusters...)
	for i := range out {
		out[i].Siblings = 0
	}
	return out
}

// fitsAnyway says whether a cluster that Refit left out still fits the controller's pods: it is
// Ready, not cordoned and its virtual node has no taint against proxies, so only room is missing,
// which the pods already there use.
func fitsAnyway(cluster string, feasible []string, pod *corev1.Pod, clusters []ClusterView) bool {
	if slices.Contains(feasible, cluster) {
		return false
	}
	chosen, err := chosenClusters(pod, clusters, nil)
	if err != nil || !chosen[cluster] {
		return false
	}
	for _, cl := range clusters {
		if cl.Name == cluster {
			_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), cl.Taints, ProxyTolerations(0), Scheduling, false)
			return cl.Ready && !cl.Cordoned && !untolerated && cl.Denied == ""
		}
	}
	return false
}

func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
