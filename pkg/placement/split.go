package placement

import (
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
// how many it should hold, the moves that get there, and the pods that cannot move (their data
// stays where it is).
type Split struct {
	Have, Want map[string]int
	Moves      []Move
	Pinned     []string
}

// Plan splits one controller's bound proxies over the feasible clusters (by weights with
// Sainte-Laguë's rule, as the webhook places pods one by one, else evenly) and plans the moves that
// get there: the newest pods of the fullest clusters first. A proxy in a cluster that is not
// feasible is over its share. Pinned pods (Pinned) are counted where they are, never moved.
func Plan(proxies []*corev1.Pod, feasible []string, weights map[string]int64) Split {
	split := Split{Have: map[string]int{}, Want: map[string]int{}}
	for _, p := range proxies {
		if c, ok := flotillav1.ClusterOfNode(p.Spec.NodeName); ok {
			split.Have[c]++
		}
	}
	split.Want = shares(len(proxies), feasible, weights, split.Have)
	movable := map[string][]*corev1.Pod{}
	for _, p := range newestFirst(proxies) {
		c, _ := flotillav1.ClusterOfNode(p.Spec.NodeName)
		if Pinned(p) {
			split.Pinned = append(split.Pinned, p.Name)
			continue
		}
		movable[c] = append(movable[c], p)
	}
	have := map[string]int{}
	for c, n := range split.Have {
		have[c] = n
	}
	for {
		from, to := fullest(have, split.Want, movable), emptiest(have, split.Want)
		if from == "" || to == "" {
			break
		}
		p := movable[from][0]
		movable[from] = movable[from][1:]
		split.Moves = append(split.Moves, Move{Pod: p, From: from, To: to})
		have[from]--
		have[to]++
	}
	sort.Strings(split.Pinned)
	return split
}

// Pinned says whether a pod's data keeps it where it is: it uses claims of its own (their data is
// in its cluster once bound; the webhook would place its replacement there again). A generic
// ephemeral volume goes with its pod: no pin.
func Pinned(p *corev1.Pod) bool {
	return len(translate.Claims(&p.Spec)) > 0
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
		names = slices.DeleteFunc(names, func(c string) bool { return weights[c] <= 0 })
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

// Groups are the elected pods of each controller, for the pods that may be judged now: bound to a
// virtual node, not terminating, Ready. A controller with a pod that is not (one moving, starting
// or stuck) is left out (busy): a rebalance moves one pod of a controller at a time, and the next
// only once the last one's replacement runs.
func Groups(proxies []corev1.Pod) (groups map[types.UID][]*corev1.Pod, busy map[types.UID]bool) {
	groups, busy = map[types.UID][]*corev1.Pod{}, map[types.UID]bool{}
	for i := range proxies {
		p := &proxies[i]
		ref := metav1.GetControllerOf(p)
		if ref == nil || p.Labels[flotillav1.LabelProxy] != "true" {
			continue
		}
		if _, ok := flotillav1.ClusterOfNode(p.Spec.NodeName); !ok || !p.DeletionTimestamp.IsZero() || !podReady(p) {
			busy[ref.UID] = true
			continue
		}
		groups[ref.UID] = append(groups[ref.UID], p)
	}
	for uid := range busy {
		delete(groups, uid)
	}
	return groups, busy
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
