package placement

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// fitClusters finds the clusters the pod fits now. It refuses only what can never run anywhere:
// no cluster registered or chosen (an unknown name is refused by chosenClusters). The clusters
// where it fails only for want of room or readiness (full nodes, a secondary away, a cordoned
// virtual node) are waiting; a pod that fits no cluster and waits for none is gated until one fits
// (its nodes may yet be relabelled or untainted).
func fitClusters(ctx context.Context, pod *corev1.Pod, c translate.Constraints, clusters []ClusterView, weights map[string]int64) (Fit, error) {
	chosen, err := chosenClusters(pod, clusters, weights)
	if err != nil {
		return Fit{}, err
	}
	if c.DataCluster != "" && dataLost(pod, c.DataCluster, clusters) {
		// Its data is out of reach for longer than it would wait: it starts afresh elsewhere.
		delete(chosen, c.DataCluster)
		c.DataCluster, c.DataClaim = "", ""
	}
	// The data decides: that cluster or none. So does a claim of devices other pods use: it is
	// allocated in one cluster.
	if !keepOnly(chosen, c.DataCluster) {
		return Fit{Why: fmt.Sprintf("the data of claim %s is in cluster %s, which is not registered or not among the clusters this pod may go to", c.DataClaim, c.DataCluster)}, nil
	}
	if !keepOnly(chosen, c.ClaimCluster) {
		return Fit{Why: fmt.Sprintf("claim %s is used by pods in cluster %s, which is not registered or not among the clusters this pod may go to", c.SharedClaim, c.ClaimCluster)}, nil
	}
	delegate := pod.DeepCopy()
	delegate.Spec.NodeSelector, delegate.Spec.Affinity, delegate.Spec.Tolerations = c.NodeSelector, c.Affinity, c.Tolerations
	needs := podNeeds{delegate: delegate, requests: resourcehelper.PodRequests(delegate, resourcehelper.PodResourcesOptions{}),
		required: nodeaffinity.GetRequiredNodeAffinity(delegate), volumeClaims: len(translate.VolumeClaims(pod)) > 0, devices: c.Devices}
	var fit Fit
	var why, all []string
	for _, cl := range clusters {
		if !chosen[cl.Name] {
			continue
		}
		all = append(all, cl.Name)
		reason, forNow := needs.misfit(ctx, cl)
		if reason == "" {
			fit.Feasible = append(fit.Feasible, cl.Name)
			continue
		}
		why = append(why, fmt.Sprintf("%s: %s", cl.Name, reason))
		if forNow {
			fit.Waiting = append(fit.Waiting, cl.Name)
		}
	}
	if len(all) == 0 {
		if len(clusters) == 0 {
			return Fit{}, Rejectf("flotilla cannot elect this pod: no secondary cluster is registered")
		}
		return Fit{}, Rejectf("flotilla cannot elect this pod: annotation %s matches no registered cluster", flotillav1.AnnotationClusterSelector)
	}
	sort.Strings(fit.Feasible)
	sort.Strings(fit.Waiting)
	if len(fit.Feasible) == 0 {
		sort.Strings(why)
		fit.Why = "no cluster fits now: " + strings.Join(why, "; ")
		if c.DataCluster != "" {
			fit.Why = fmt.Sprintf("the data of claim %s is in cluster %s, which cannot take it now: %s", c.DataClaim, c.DataCluster, strings.Join(why, "; "))
			if translate.RecreatesOnVolumeClusterLoss(pod) {
				fit.Why += "; with " + flotillav1.AnnotationOnVolumeClusterLoss + ": recreate it starts on fresh claims elsewhere once that cluster has been unreachable for its failover bound"
			}
		}
	}
	return fit, nil
}

// podNeeds is what a cluster must give a delegate: room on a node its selectors and tolerations
// allow, claims of class flotilla, and the devices its claims request.
type podNeeds struct {
	delegate     *corev1.Pod
	requests     corev1.ResourceList
	required     nodeaffinity.RequiredNodeAffinity
	volumeClaims bool
	devices      map[string]resourcev1.ResourceClaimSpec
}

// misfit says why the cluster cannot take the delegate ("" when it can), and whether only for now.
func (n podNeeds) misfit(ctx context.Context, cl ClusterView) (string, bool) {
	if cl.Denied != "" {
		return cl.Denied, false
	}
	if n.volumeClaims && cl.NoClaims {
		return fmt.Sprintf("it takes no claims of class %s (storage class none in its registration)", flotillav1.StorageClassRemote), false
	}
	reason, forNow, nodes := clusterMisfit(cl, n.delegate, n.requests, n.required, len(n.devices) > 0)
	if reason != "" || len(n.devices) == 0 || cl.NodesUnknown {
		return reason, forNow
	}
	// The devices are judged on the nodes that take the pod otherwise. Pure and bounded: no
	// request is made, the allocator reads the view.
	return deviceMisfit(ctx, cl, n.delegate, nodes, n.devices)
}

// chosenClusters applies flotilla.dev/clusters, flotilla.dev/cluster-weights (parsed by
// ClusterWeights: a cluster of weight 0 takes none) and flotilla.dev/cluster-selector.
func chosenClusters(pod *corev1.Pod, clusters []ClusterView, weights map[string]int64) (map[string]bool, error) {
	named := make([]Cluster, 0, len(clusters))
	for _, c := range clusters {
		named = append(named, Cluster{Name: c.Name, Labels: c.Labels})
	}
	chosen, err := Chosen(pod, named, weights)
	if err != nil {
		return nil, Rejectf("%s", err.Error())
	}
	return chosen, nil
}

// keepOnly leaves only cluster among the chosen ones when it is named (""), and says whether it
// was among them.
func keepOnly(chosen map[string]bool, cluster string) bool {
	if cluster == "" {
		return true
	}
	for name := range chosen {
		if name != cluster {
			delete(chosen, name)
		}
	}
	return chosen[cluster]
}

var errNoNode = errors.New("no eligible node")

// clusterMisfit says why no node of a cluster can take the delegate ("" when one can), and
// whether only for now: the cluster is away, cordoned, or full, rather than without any node the
// delegate's selectors and tolerations allow.
//
// With every, it returns all the nodes that take the delegate (their devices are judged next);
// without, it stops at the first.
func clusterMisfit(cl ClusterView, delegate *corev1.Pod, requests corev1.ResourceList, required nodeaffinity.RequiredNodeAffinity, every bool) (string, bool, []NodeView) {
	if !cl.Ready {
		return fmt.Sprintf("not ready (%s)", cl.Reason), true, nil
	}
	if cl.Cordoned {
		return "its virtual node is cordoned", true, nil
	}
	if t, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), cl.Taints, ProxyTolerations(0), Scheduling, false); untolerated {
		return fmt.Sprintf("its virtual node has taint %s", t.ToString()), true, nil
	}
	if short := outOfLent(cl.Lent, requests); short != "" {
		return "it lends this primary no more room (" + short + ")", true, nil
	}
	if cl.NodesUnknown {
		return "", false, nil
	}
	if len(cl.Nodes) == 0 {
		return errNoNode.Error(), true, nil
	}
	// The nodes closest to taking the pod come first in the reason: those only full are where it
	// would run once room frees, what a reader of the reason wants to see; then those too small,
	// those tainted, those without the resource at all, those the pod's selectors leave out.
	type misfit struct {
		reason string
		rank   misfitRank
	}
	misfits := make([]misfit, 0, len(cl.Nodes))
	var fitting []NodeView
	for _, n := range cl.Nodes {
		reason, rank := nodeMisfit(n, delegate, requests, required)
		if reason == "" {
			if !every {
				return "", false, []NodeView{n}
			}
			fitting = append(fitting, n)
			continue
		}
		misfits = append(misfits, misfit{reason: fmt.Sprintf("node %s %s", n.Name, reason), rank: rank})
	}
	if len(fitting) > 0 {
		return "", false, fitting
	}
	sort.SliceStable(misfits, func(i, j int) bool { return misfits[i].rank < misfits[j].rank })
	reasons := make([]string, 0, 4)
	for i, m := range misfits {
		if i == 3 {
			reasons = append(reasons, fmt.Sprintf("and %d more nodes", len(misfits)-3))
			break
		}
		reasons = append(reasons, m.reason)
	}
	return strings.Join(reasons, ", "), misfits[0].rank == rankOnlyFull, nil
}

// outOfLent says what a pod needs beyond what its cluster still lends the primary ("" when it
// fits, or nothing is lent with a limit): its requests, and one pod.
func outOfLent(lent, requests corev1.ResourceList) string {
	need := requests.DeepCopy()
	need[corev1.ResourcePods] = resource.MustParse("1")
	return lentShort(lent, need)
}

// lentShort says what of need is beyond what a cluster still lends ("" when all of it fits, or
// nothing is lent with a limit).
func lentShort(lent, need corev1.ResourceList) string {
	if lent == nil {
		return ""
	}
	var short []string
	for name, want := range need {
		room, limited := lent[name]
		if limited && !want.IsZero() && room.Cmp(want) < 0 {
			short = append(short, fmt.Sprintf("%s %s left of what it lends, %s requested", name, room.String(), want.String()))
		}
	}
	sort.Strings(short)
	return strings.Join(short, ", ")
}

// misfitRank orders the reasons a node cannot take a delegate, closest first.
type misfitRank int

const (
	// rankOnlyFull: the node would take the delegate once pods there finish.
	rankOnlyFull misfitRank = iota
	// rankTooSmall: the node has some of every resource requested, less than requested in all.
	rankTooSmall
	// rankTainted: the node has a taint the pod does not tolerate.
	rankTainted
	// rankLacking: the node has none of a resource requested.
	rankLacking
	// rankLeftOut: the pod's node selector or affinity does not match the node.
	rankLeftOut
)

// nodeMisfit says why a node cannot take the delegate ("" when it can), and how close it is.
func nodeMisfit(n NodeView, delegate *corev1.Pod, requests corev1.ResourceList, required nodeaffinity.RequiredNodeAffinity) (string, misfitRank) {
	node := &corev1.Node{}
	node.Name, node.Labels, node.Spec.Taints = n.Name, n.Labels, n.Taints
	if ok, _ := required.Match(node); !ok {
		return "does not match the pod's node selector or affinity", rankLeftOut
	}
	if t, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), n.Taints, delegate.Spec.Tolerations, Scheduling, false); untolerated {
		return fmt.Sprintf("has taint %s the pod does not tolerate", t.ToString()), rankTainted
	}
	var short, never []string
	rank := rankTooSmall
	for name, want := range requests {
		if want.IsZero() {
			continue
		}
		if total, known := n.Allocatable[name]; n.Allocatable != nil && (!known || total.Cmp(want) < 0) {
			// More than the node has at all: it never fits there, however much frees (8 free
			// GPUs over 8 nodes of one never run a pod that needs 4).
			never = append(never, fmt.Sprintf("%s %s of %s requested", name, total.String(), want.String()))
			if total.IsZero() {
				rank = rankLacking
			}
			continue
		}
		free, ok := n.Free[name]
		if !ok || free.Cmp(want) < 0 {
			short = append(short, fmt.Sprintf("%s %s free of %s requested", name, free.String(), want.String()))
		}
	}
	if len(never) > 0 {
		sort.Strings(never)
		return "has in all only " + strings.Join(never, ", "), rank
	}
	if len(short) > 0 {
		sort.Strings(short)
		return "has only " + strings.Join(short, ", "), rankOnlyFull
	}
	return "", rankOnlyFull
}
