package proxy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha1 "k8s.io/api/scheduling/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/seal"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// placeGang lets a gang's members go together, or none of them. While fewer members than its
// size are there, each waits, saying how many are. Once all are, the gang goes to the one cluster
// that fits every member (placement.PlaceGang), each member's gate removed and that cluster its
// affinity; none fits: each member says why, per cluster, and is looked at again with a backoff. A
// member that comes after the others went (a replacement) follows them to their cluster.
func (r *Reconciler) placeGang(ctx context.Context, proxy *corev1.Pod, gang placement.Gang, clusters []placement.ClusterView) (ctrl.Result, error) {
	if gang.Workload != nil || gang.PodGroup != "" {
		var size int
		var isGang bool
		var why string
		var err error
		if gang.Workload != nil {
			size, isGang, why, err = r.workloadGang(ctx, proxy.Namespace, gang.Workload)
		} else {
			size, isGang, why, err = r.podGroupGang(ctx, proxy.Namespace, gang.PodGroup)
		}
		switch {
		case err != nil:
			return ctrl.Result{}, err
		case !isGang:
			return r.placeOne(ctx, proxy, clusters)
		case why != "":
			r.event(proxy, corev1.EventTypeNormal, flotillav1.ReasonGangWaiting, "Wait", "%s", why)
			return ctrl.Result{RequeueAfter: pendingRetry(proxy, r.now())}, r.sayUnschedulable(ctx, proxy, why)
		}
		gang.Size = size
	}
	mu, _ := r.gangs.LoadOrStore(proxy.Namespace+"/"+gang.Name, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	var proxies corev1.PodList
	if err := r.Client.List(ctx, &proxies, client.InNamespace(proxy.Namespace), client.MatchingLabels{flotillav1.LabelProxy: "true"}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the members of gang %s/%s: %w", proxy.Namespace, gang.Name, err)
	}
	m := gangMembersOf(proxies.Items, gang)
	waiting, gone, count, held := m.waiting, m.gone, m.count, m.held
	sort.Slice(waiting, func(i, j int) bool { return waiting[i].Name < waiting[j].Name })
	var why string
	switch {
	case gone != "":
		// The rest of the gang runs there: a member that comes later joins it, unless that
		// cluster is away (its members are being failed over: the replacement waits for them to
		// go, and the gang starts whole elsewhere).
		why = cannotJoin(gang.Name, gone, clusters)
	case count < gang.Size:
		why = fmt.Sprintf("gang %s waits for its members: %d of %d are here", gang.Name, count, gang.Size)
	case held > 0:
		// Another gate (Kueue's admission) still holds members: what lets them go may also say
		// where (a flavor's node labels), so the gang is placed once none is held.
		why = fmt.Sprintf("gang %s waits for %d of its %d members to be let go by another scheduling gate (Kueue's admission)", gang.Name, held, gang.Size)
	default:
		placed, err := placement.PlaceGang(waiting, clusters)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("placing gang %s/%s: %w", proxy.Namespace, gang.Name, err)
		}
		if placed.Cluster == "" {
			why = fmt.Sprintf("no cluster fits all %d members of gang %s: %s", len(waiting), gang.Name, placed.Why)
		}
		gone = placed.Cluster
	}
	if why != "" {
		r.event(proxy, corev1.EventTypeNormal, flotillav1.ReasonGangWaiting, "Wait", "%s", why)
		return ctrl.Result{RequeueAfter: pendingRetry(proxy, r.now())}, r.sayUnschedulable(ctx, proxy, why)
	}
	var released []string
	for _, m := range waiting {
		ok, err := r.release(ctx, m, []string{gone}, gone)
		if err != nil {
			return ctrl.Result{}, err
		}
		if ok {
			released = append(released, m.Name)
			r.event(m, corev1.EventTypeNormal, flotillav1.ReasonGangPlaced, "Place", "Gang %s goes to cluster %s, all its members together", gang.Name, gone)
		}
	}
	if len(released) > 0 {
		ctrl.LoggerFrom(ctx).Info("Gang placed", "gang", gang.Name, "cluster", gone, "members", strings.Join(released, ","))
	}
	return ctrl.Result{}, nil
}

// workloadGang reads the gang of the Workload API pod group ref names (placement.WorkloadGang),
// live: Workloads are read only while a member waits, and the API is alpha (a primary that does
// not serve it has members of no gang, placed one by one).
func (r *Reconciler) workloadGang(ctx context.Context, namespace string, ref *corev1.WorkloadReference) (size int, gang bool, why string, err error) {
	if r.Workloads == nil {
		return 0, false, "", nil
	}
	var w schedulingv1alpha1.Workload
	err = r.Workloads.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, &w)
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err) && !workloadServed(err):
		return 0, false, "", nil
	case apierrors.IsNotFound(err):
		size, gang, why = placement.WorkloadGang(nil, ref)
		return size, gang, why, nil
	case err != nil:
		return 0, false, "", fmt.Errorf("reading Workload %s/%s: %w", namespace, ref.Name, err)
	}
	size, gang, why = placement.WorkloadGang(&w, ref)
	return size, gang, why, nil
}

// podGroupVersions are the versions of scheduling.k8s.io that serve PodGroups, newest first:
// v1beta1 from Kubernetes 1.37, v1alpha2 in 1.36.
var podGroupVersions = []string{"v1beta1", "v1alpha2"}

// podGroupGang reads the gang of PodGroup name (placement.PodGroupGang), live, at the first
// version the primary serves: PodGroups are read only while a member waits. A primary that serves
// none has no PodGroup gangs (the API server drops spec.schedulingGroup then): placed one by one.
func (r *Reconciler) podGroupGang(ctx context.Context, namespace, name string) (size int, gang bool, why string, err error) {
	if r.Workloads == nil {
		return 0, false, "", nil
	}
	for _, version := range podGroupVersions {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "scheduling.k8s.io", Version: version, Kind: "PodGroup"})
		err := r.Workloads.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)
		switch {
		case meta.IsNoMatchError(err) || apierrors.IsNotFound(err) && !workloadServed(err):
			continue
		case apierrors.IsNotFound(err):
			size, gang, why = placement.PodGroupGang(nil, name)
			return size, gang, why, nil
		case err != nil:
			return 0, false, "", fmt.Errorf("reading PodGroup %s/%s: %w", namespace, name, err)
		}
		var pg placement.PodGroup
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pg); err != nil {
			return 0, false, "", fmt.Errorf("reading PodGroup %s/%s: %w", namespace, name, err)
		}
		size, gang, why = placement.PodGroupGang(&pg, name)
		return size, gang, why, nil
	}
	return 0, false, "", nil
}

// workloadServed tells a Workload that does not exist from an API server that serves no
// Workloads: only the first's NotFound names the object.
func workloadServed(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	return status.Status().Details.Name != ""
}

// cannotJoin says why a member that comes after its gang went to cluster may not join it there
// ("" when it may): the cluster is not ready, or carries the failover taint. The member waits;
// once the others are gone, the gang is placed anew, whole.
func cannotJoin(gang, cluster string, clusters []placement.ClusterView) string {
	for _, cl := range clusters {
		if cl.Name != cluster {
			continue
		}
		if !cl.Ready || cl.FailoverTainted {
			return fmt.Sprintf("gang %s's other members are in cluster %s, which is away: this member waits for them to go, and the gang starts whole elsewhere", gang, cluster)
		}
		return ""
	}
	return ""
}

// gangState is what a gang's members say: those Flotilla's gate holds, the cluster the others
// went to ("" none), how many there are (not finished, not deleted), and how many another gate
// still holds.
type gangState struct {
	waiting     []*corev1.Pod
	gone        string
	count, held int
}

// gangMembersOf reads a gang's state from its namespace's proxies.
func gangMembersOf(proxies []corev1.Pod, gang placement.Gang) gangState {
	var s gangState
	for i := range proxies {
		p := &proxies[i]
		if g, ok, _ := placement.GangOf(p); !ok || !g.Same(gang) || !p.DeletionTimestamp.IsZero() ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue // not of this gang, or gone: a finished gang's members do not steer the next
		}
		s.count++
		if heldByOthers(p) {
			s.held++
		}
		switch {
		case gated(p):
			s.waiting = append(s.waiting, p)
		case p.Annotations[flotillav1.AnnotationGangCluster] != "":
			s.gone = p.Annotations[flotillav1.AnnotationGangCluster]
		}
	}
	return s
}

// heldByOthers says whether a scheduling gate other than Flotilla's holds the proxy.
func heldByOthers(proxy *corev1.Pod) bool {
	return slices.ContainsFunc(proxy.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
		return g.Name != flotillav1.SchedulingGatePlacement && g.Name != flotillav1.SchedulingGateQuota
	})
}

// release lets a gated proxy go to clusters: its gate removed, the clusters its node affinity
// (and, for a gang's member, its gang's cluster noted), its seal stamped anew, in one update
// (Kubernetes lets a gated pod's node affinity be set). Only a proxy whose seal verifies is
// touched: the reconciler never seals what the webhook did not make. false: it is no longer a
// gated proxy of that UID (released already, or gone).
func (r *Reconciler) release(ctx context.Context, proxy *corev1.Pod, clusters []string, gangCluster string) (bool, error) {
	if seal.Verify(r.SealKey, proxy) != nil {
		return false, nil
	}
	// The live pod: the cache keeps no affinity, tolerations or token volume of a proxy.
	var live corev1.Pod
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(proxy), &live); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if !gated(&live) || live.UID != proxy.UID {
		return false, nil
	}
	base := live.DeepCopy()
	live.Spec.SchedulingGates = slices.DeleteFunc(live.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
		return g.Name == flotillav1.SchedulingGatePlacement
	})
	live.Spec.Affinity = translate.ClusterAffinity(clusters)
	delete(live.Annotations, flotillav1.AnnotationNoClusterFits)
	if gangCluster != "" {
		live.Annotations[flotillav1.AnnotationGangCluster] = gangCluster
	}
	live.Annotations[flotillav1.AnnotationSeal] = seal.Stamp(r.SealKey, &live)
	if err := r.Client.Patch(ctx, &live, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return true, nil
}
