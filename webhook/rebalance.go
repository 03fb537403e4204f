package webhook

import (
	"fmt"
	"slices"
	"sort"

	"github.com/go-logr/logr"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	corev1 "k8s.io/api/core/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// Move is one elected pod a rebalance evicts: its controller re-creates it, and the webhook places
// the replacement where the split is furthest behind (From loses one, To is expected to gain one).
type Move struct {
	Pod      *corev1.Pod
	From, To string
}

// Split is what a rebalance decided for one controller's proxies: how many each cluster holds,
// how many it should hold (the split placement would choose now), the moves that get there, and
// the pods that cannot move (their data stays where it is).
type Split struct {
	Have, Want map[string]int
	Moves      []Move
	Pinned     []string
}

// Rebalance plans the moves that bring one controller's bound, live proxies (proxies; pods of one
// template) to the split placement would choose now over clusters: even over the clusters the pod
// fits, or its flotilla.dev/cluster-weights split (Sainte-Laguë, as weightedNext places pods one by
// one). A proxy in a cluster that no longer fits it (cordoned, away, left its selector) is over
// its share. Pods whose claims hold data in their cluster are pinned: counted where they are,
// never moved. Moves take the newest pods of the fullest clusters first. Pure.
func Rebalance(proxies []*corev1.Pod, clusters []ClusterView) (Split, error) {
	split := Split{Have: map[string]int{}, Want: map[string]int{}}
	if len(proxies) == 0 {
		return split, nil
	}
	// The template: a pod that may move (one pinned by its data fits its data's cluster only).
	tmpl := proxies[0]
	for _, p := range proxies {
		if !pinned(p) {
			tmpl = p
			break
		}
	}
	feasible, _, err := Refit(tmpl, withoutSiblings(clusters))
	if err != nil {
		return split, fmt.Errorf("placing %s/%s: %w", tmpl.Namespace, tmpl.Name, err)
	}
	weights, err := clusterWeights(tmpl, clusters)
	if err != nil {
		return split, err
	}
	for _, p := range proxies {
		if c, ok := flotillav1.ClusterOfNode(p.Spec.NodeName); ok {
			split.Have[c]++
		}
	}
	// A proxy uses the capacity of the cluster it runs in: that cluster fits it still.
	for c := range split.Have {
		if fitsAnyway(c, feasible, tmpl, clusters) {
			feasible = appendOnce(feasible, c)
		}
	}
	split.Want = shares(len(proxies), feasible, weights, split.Have)
	over := map[string][]*corev1.Pod{}
	for _, p := range newestFirst(proxies) {
		c, _ := flotillav1.ClusterOfNode(p.Spec.NodeName)
		if pinned(p) {
			split.Pinned = append(split.Pinned, p.Name)
			continue
		}
		over[c] = append(over[c], p)
	}
	have := map[string]int{}
	for c, n := range split.Have {
		have[c] = n
	}
	for {
		from := fullest(have, split.Want, over)
		to := emptiest(have, split.Want)
		if from == "" || to == "" {
			break
		}
		p := over[from][0]
		over[from] = over[from][1:]
		split.Moves = append(split.Moves, Move{Pod: p, From: from, To: to})
		have[from]--
		have[to]++
	}
	sort.Strings(split.Pinned)
	return split, nil
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
			_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), cl.Taints, proxyTolerations(0), scheduling, false)
			return cl.Ready && !cl.Cordoned && !untolerated
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

// shares splits n pods over the feasible clusters: by weight with Sainte-Laguë's rule, else
// evenly, the remainder going to the clusters that hold the most already (fewest moves), then by
// name.
func shares(n int, feasible []string, weights map[string]int64, have map[string]int) map[string]int {
	want := map[string]int{}
	names := append([]string(nil), feasible...)
	sort.Slice(names, func(i, j int) bool {
		if have[names[i]] != have[names[j]] {
			return have[names[i]] > have[names[j]]
		}
		return names[i] < names[j]
	})
	if weights != nil {
		kept := names[:0]
		for _, c := range names {
			if weights[c] > 0 {
				kept = append(kept, c)
			}
		}
		names = kept
	}
	if len(names) == 0 {
		return want
	}
	if weights == nil {
		for i, c := range names {
			want[c] = n / len(names)
			if i < n%len(names) {
				want[c]++
			}
		}
		return want
	}
	for range n {
		best := ""
		var bestNum, bestDen int64 = -1, 1
		for _, c := range names {
			num, w := int64(2*want[c]+1), weights[c]
			if bestNum < 0 || num*bestDen < bestNum*w {
				best, bestNum, bestDen = c, num, w
			}
		}
		want[best]++
	}
	return want
}

// fullest is the cluster furthest over its share that still has a pod that may move ("" when
// none is over).
func fullest(have, want map[string]int, movable map[string][]*corev1.Pod) string {
	best, most := "", 0
	for _, c := range sortedKeys(have) {
		if d := have[c] - want[c]; d > most && len(movable[c]) > 0 {
			best, most = c, d
		}
	}
	return best
}

// emptiest is the cluster furthest under its share ("" when none is under).
func emptiest(have, want map[string]int) string {
	best, most := "", 0
	for _, c := range sortedKeys(want) {
		if d := want[c] - have[c]; d > most {
			best, most = c, d
		}
	}
	return best
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// newestFirst orders pods by creation, newest first (then by name): a rebalance moves the pods
// that have run the least.
func newestFirst(pods []*corev1.Pod) []*corev1.Pod {
	out := append([]*corev1.Pod(nil), pods...)
	sort.SliceStable(out, func(i, j int) bool {
		ti, tj := out[i].CreationTimestamp.Time, out[j].CreationTimestamp.Time
		if !ti.Equal(tj) {
			return ti.After(tj)
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// pinned says whether a pod's data keeps it where it is: it uses claims of its own (their data is
// in its cluster once bound; the webhook would place its replacement there again). A generic
// ephemeral volume goes with its pod: no pin.
func pinned(p *corev1.Pod) bool {
	return len(translate.Claims(&p.Spec)) > 0
}
