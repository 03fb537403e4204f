package cli

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// The decisions of `cluster drain`, pure: what one look at the cluster (drainInput) says to do
// with each proxy on its virtual node. The command gathers, acts, and looks again until nothing
// is left, so a drain interrupted and run again carries on from what the primary shows.
//
// At-most-once pods move one at a time, and the next one only once the previous one's proxy is
// gone from the primary. That proves its delegate gone: the proxy controller
// (pkg/controllers/proxy, reconcileDelete then letGo) removes the proxy's flotilla.dev/delegate
// finalizer only when the delegate watch saw that delegate deleted or a live read of the
// secondary finds no delegate of the proxy's UID. The only other ways out (releaseReason) are the
// virtual node gone, the node fenced out-of-service (an admin declared the cluster dead), and,
// for at-least-once pods only, the unreachable taint: none holds for an at-most-once pod on a
// virtual node that is there and not fenced, as during a drain.

// drainInput is what one look at a cluster being drained gathers.
type drainInput struct {
	// cluster is the cluster being drained.
	cluster string
	// proxies are the pods bound to its virtual node.
	proxies []corev1.Pod
	// claimClusters is, for each claim ("namespace/name") of class flotilla whose data a
	// cluster holds, that cluster (the claim's flotilla.dev/volume-cluster).
	claimClusters map[string]string
	// moving are the UIDs of at-most-once pods this drain evicted: while one is still listed, it
	// counts as moving even before the API shows it terminating.
	moving map[types.UID]bool
	// force evicts pods no controller owns (they are not re-created).
	force bool
	// dropData evicts pods whose claims hold their data in the cluster (`cluster remove
	// --delete-volumes`: the data goes anyway).
	dropData bool
}

// drainAction is what a drain does with one proxy now.
type drainAction string

const (
	// drainEvict: evict it now, through the Eviction API.
	drainEvict drainAction = "evict"
	// drainRefuse: never evicted by this drain; why says what the user can do.
	drainRefuse drainAction = "refuse"
	// drainMoving: evicted; its delegate is being stopped and its proxy goes after it.
	drainMoving drainAction = "moving"
	// drainHeld: at-most-once, waiting for the one moving to be gone.
	drainHeld drainAction = "held"
	// drainIgnore: a DaemonSet's pod; it never runs on a virtual node and its DaemonSet would
	// put it back.
	drainIgnore drainAction = "ignore"
)

// podVerdict is the drain's decision for one proxy.
type podVerdict struct {
	pod        *corev1.Pod
	action     drainAction
	why        string
	atMostOnce bool
}

// key is the pod's namespace/name.
func (v podVerdict) key() string { return v.pod.Namespace + "/" + v.pod.Name }

// drainPlan is every proxy's verdict, by action; evict is in the order to evict.
type drainPlan struct {
	evict, refused, moving, held, ignored []podVerdict
}

// left counts the pods still on the virtual node that the drain is to move (or refuses to).
func (p drainPlan) left() int { return len(p.evict) + len(p.refused) + len(p.moving) + len(p.held) }

// stuck says whether only refused pods are left: nothing the drain does can change that.
func (p drainPlan) stuck() bool {
	return len(p.refused) > 0 && len(p.evict)+len(p.moving)+len(p.held) == 0
}

// planDrain decides, for every proxy on the cluster's virtual node, what the drain does now.
func planDrain(in drainInput) drainPlan {
	var p drainPlan
	var once []podVerdict
	onceMoving := ""
	pods := sortedForDrain(slices.Clone(in.proxies))
	for i := range pods {
		pod := &pods[i]
		v := podVerdict{pod: pod, atMostOnce: translate.AtMostOnce(pod)}
		switch {
		case pod.DeletionTimestamp != nil || (v.atMostOnce && in.moving[pod.UID]):
			v.action, v.why = drainMoving, "evicted; waiting for its delegate to stop and its proxy to go"
			p.moving = append(p.moving, v)
			if v.atMostOnce && onceMoving == "" {
				onceMoving = v.key()
			}
			continue
		case ownedBy(pod, "DaemonSet"):
			v.action, v.why = drainIgnore, "a DaemonSet's pod: never run on a virtual node"
			p.ignored = append(p.ignored, v)
			continue
		case translate.Terminal(pod):
			v.action, v.why = drainEvict, "finished"
			p.evict = append(p.evict, v)
			continue
		}
		if why := refusal(pod, in); why != "" {
			v.action, v.why = drainRefuse, why
			p.refused = append(p.refused, v)
			continue
		}
		if v.atMostOnce {
			once = append(once, v)
			continue
		}
		v.action = drainEvict
		p.evict = append(p.evict, v)
	}
	for i, v := range once {
		if i == 0 && onceMoving == "" {
			v.action, v.why = drainEvict, "at-most-once: moves alone"
			p.evict = append(p.evict, v)
			continue
		}
		v.action = drainHeld
		v.why = "at-most-once: waits until " + cmpOr(onceMoving, once[0].key()) + " is gone from the primary (its delegate proven stopped)"
		p.held = append(p.held, v)
	}
	return p
}

// cmpOr is a unless empty, else b.
func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// refusal says why the drain must not evict pod ("" when it may).
func refusal(pod *corev1.Pod, in drainInput) string {
	if metav1.GetControllerOf(pod) == nil && !in.force {
		return "no controller owns it: evicted, it would be gone for good rather than re-created in another cluster " +
			"(--force evicts it anyway)"
	}
	if in.dropData {
		return ""
	}
	held := placement.DataHeldIn(pod, in.claimClusters, in.cluster)
	if len(held) == 0 {
		return ""
	}
	msg := fmt.Sprintf("its claim(s) %s of class %s hold their data in %s, and Flotilla does not move data: "+
		"a pod's cluster follows its claims' data, so its replacement would only wait for %s. Move the data first",
		strings.Join(held, ", "), flotillav1.StorageClassRemote, in.cluster, in.cluster)
	if ownedBy(pod, "StatefulSet") {
		// recreate trades at-most-once away on a failover: not offered for an identity.
		return msg + " (docs/storage.md says when " + flotillav1.AnnotationOnVolumeClusterLoss + "=" +
			flotillav1.OnVolumeClusterLossRecreate + " suits a StatefulSet, and what it trades)"
	}
	return msg + fmt.Sprintf(", or annotate the pod (its template) %s=%s to let it start elsewhere on new, empty claims",
		flotillav1.AnnotationOnVolumeClusterLoss, flotillav1.OnVolumeClusterLossRecreate)
}

// ownedBy says whether pod's controller is of kind.
func ownedBy(pod *corev1.Pod, kind string) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.Kind == kind
}

// sortedForDrain sorts pods in the order a drain takes them: by namespace, then controller, then
// (a StatefulSet's) highest ordinal first, as a StatefulSet's own rolling update goes. It sorts
// pods in place and returns it.
func sortedForDrain(pods []corev1.Pod) []corev1.Pod {
	owner := func(p *corev1.Pod) string {
		if ref := metav1.GetControllerOf(p); ref != nil {
			return ref.Kind + "/" + ref.Name
		}
		return ""
	}
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := &pods[i], &pods[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if oa, ob := owner(a), owner(b); oa != ob {
			return oa < ob
		}
		if ordA, okA := ordinal(a.Name); okA && ownedBy(a, "StatefulSet") {
			if ordB, okB := ordinal(b.Name); okB {
				return ordA > ordB
			}
		}
		return a.Name < b.Name
	})
	return pods
}

// ordinal is the number after a StatefulSet pod's last '-'.
func ordinal(name string) (int, bool) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(name[i+1:])
	return n, err == nil
}

// budgetsOf names the PodDisruptionBudgets ("namespace/name") that select pod.
func budgetsOf(pod *corev1.Pod, pdbs []policyv1.PodDisruptionBudget) []string {
	var out []string
	for _, b := range pdbs {
		if b.Namespace != pod.Namespace || b.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, b.Namespace+"/"+b.Name)
	}
	sort.Strings(out)
	return out
}

// Retries of an eviction a PodDisruptionBudget refused: after evictionRetryFirst, doubling, at
// most evictionRetryLongest (kubectl drain retries every 5 s).
const (
	evictionRetryFirst   = 250 * time.Millisecond
	evictionRetryLongest = 4 * time.Second
)

// evictionBackoff is how long to wait before evicting a pod again after refusals in a row.
func evictionBackoff(refusals int) time.Duration {
	d := evictionRetryFirst
	for i := 1; i < refusals && d < evictionRetryLongest; i++ {
		d *= 2
	}
	return min(d, evictionRetryLongest)
}

// drainETA estimates the time left from the rate so far: moved of the pods in elapsed, left to
// go. false while nothing has moved yet.
func drainETA(elapsed time.Duration, moved, left int) (time.Duration, bool) {
	if moved <= 0 || elapsed <= 0 {
		return 0, false
	}
	return (elapsed * time.Duration(left) / time.Duration(moved)).Round(time.Second), true
}

// drainProgress is one line of progress: pods left, how many are moving, held, refused and
// blocked (per PodDisruptionBudget), moved so far and the ETA.
func drainProgress(cluster string, p drainPlan, blocked map[string]string, moved int, elapsed time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d pod(s) left", cluster, p.left())
	var parts []string
	if n := len(p.moving); n > 0 {
		parts = append(parts, fmt.Sprintf("%d moving", n))
	}
	perBudget := map[string]int{}
	for _, v := range p.evict {
		if by, ok := blocked[v.key()]; ok {
			perBudget[by]++
		}
	}
	budgets := make([]string, 0, len(perBudget))
	for by := range perBudget {
		budgets = append(budgets, by)
	}
	sort.Strings(budgets)
	for _, by := range budgets {
		parts = append(parts, fmt.Sprintf("%d blocked by %s", perBudget[by], by))
	}
	if n := len(p.held); n > 0 {
		parts = append(parts, fmt.Sprintf("%d at-most-once waiting their turn", n))
	}
	if n := len(p.refused); n > 0 {
		parts = append(parts, fmt.Sprintf("%d refused", n))
	}
	if len(parts) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, "; %d moved in %s", moved, elapsed.Round(time.Second))
	if eta, ok := drainETA(elapsed, moved, p.left()-len(p.refused)); ok && p.left() > len(p.refused) {
		fmt.Fprintf(&b, ", ETA %s", eta)
	}
	return b.String()
}

// drainLeft lists what is left on the cluster, one pod a line, each with why.
func drainLeft(p drainPlan, blocked map[string]string) string {
	var lines []string
	add := func(vs []podVerdict, why func(podVerdict) string) {
		for _, v := range vs {
			lines = append(lines, "  "+v.key()+": "+why(v))
		}
	}
	add(p.refused, func(v podVerdict) string { return "refused: " + v.why })
	add(p.moving, func(v podVerdict) string { return v.why })
	add(p.evict, func(v podVerdict) string {
		if by, ok := blocked[v.key()]; ok {
			return "eviction refused by " + by
		}
		return "not evicted yet"
	})
	add(p.held, func(v podVerdict) string { return v.why })
	return strings.Join(lines, "\n")
}
