package replicator

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// refuse reports a Replicator that writes nothing anywhere, and why: Synced and Ready False with
// the reason, and a Warning Event.
func (r *Reconciler) refuse(rep *flotillav1.Replicator, reason, msg string) {
	for _, t := range []string{flotillav1.ConditionSynced, flotillav1.ConditionReady} {
		meta.SetStatusCondition(&rep.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionFalse,
			Reason: reason, Message: msg, ObservedGeneration: rep.Generation})
	}
	rep.Status.Synced, rep.Status.ObservedGeneration = flotillav1.SyncedFalse, rep.Generation
	r.event(rep, corev1.EventTypeWarning, reason, "Apply", "%s", msg)
}

// setStatus composes plumber's applied[] and synced, the per-cluster state and the conditions.
func setStatus(rep *flotillav1.Replicator, results []placeResult, res Resolution) {
	st := &rep.Status
	st.ObservedGeneration = rep.Generation
	st.Applied, st.Clusters = nil, nil
	synced := 0
	var problems []string
	notReady := 0
	for _, pr := range results {
		st.Applied = append(st.Applied, pr.applied...)
		st.Clusters = append(st.Clusters, pr.sync)
		if pr.sync.Synced {
			synced++
		} else {
			problems = append(problems, pr.sync.Name+": "+pr.sync.Message)
		}
		if pr.sync.ReadyReplicas < pr.sync.Replicas {
			notReady++
		}
	}
	sort.SliceStable(st.Applied, func(i, j int) bool { return clusterOrder(st.Applied[i].Cluster) < clusterOrder(st.Applied[j].Cluster) })
	st.ClusterCount = fmt.Sprintf("%d/%d", synced, len(results))
	cond := metav1.Condition{Type: flotillav1.ConditionSynced, Status: metav1.ConditionTrue, Reason: flotillav1.ReasonSynced,
		Message: fmt.Sprintf("Applied in %d cluster(s)", synced), ObservedGeneration: rep.Generation}
	switch {
	case res.Problem() != "":
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, flotillav1.ReasonUnknownTargets, "targetCluster: "+res.Problem()
	case len(problems) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, flotillav1.ReasonApplyFailed
		cond.Message = fmt.Sprintf("%d of %d cluster(s) not synced: %s", len(problems), len(results), joinShort(problems))
		for _, pr := range results {
			if pr.problem != "" {
				cond.Reason = pr.problem
			}
		}
	}
	st.Synced = flotillav1.SyncedTrue
	if cond.Status != metav1.ConditionTrue {
		st.Synced = flotillav1.SyncedFalse
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	ready := metav1.Condition{Type: flotillav1.ConditionReady, Status: metav1.ConditionTrue, Reason: flotillav1.ReasonReplicasReady,
		Message: "The Deployment's replicas are ready in every cluster", ObservedGeneration: rep.Generation}
	switch {
	case rep.Spec.DeploymentSpec == nil:
		ready.Reason, ready.Message = flotillav1.ReasonNoDeployment, "No Deployment to run"
	case notReady > 0 || cond.Status != metav1.ConditionTrue:
		ready.Status, ready.Reason = metav1.ConditionFalse, flotillav1.ReasonReplicasNotReady
		ready.Message = fmt.Sprintf("Replicas not ready (or not applied) in %d cluster(s)", max(notReady, len(problems)))
	}
	meta.SetStatusCondition(&st.Conditions, ready)
}

func clusterOrder(name string) string {
	if name == PrimaryName {
		return ""
	}
	return name
}

func joinShort(list []string) string {
	const most = 3
	if len(list) <= most {
		return fmt.Sprint(list)
	}
	return fmt.Sprintf("%v and %d more", list[:most], len(list)-most)
}
