package replicator

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// refuse reports a Replicator that writes nothing anywhere, and why: Synced, Ready and Healthy False with
// the reason, and a Warning Event.
func (r *Reconciler) refuse(rep *flotillav1.Replicator, reason, msg string) {
	for _, t := range []string{flotillav1.ConditionSynced, flotillav1.ConditionReady, flotillav1.ConditionHealthy} {
		meta.SetStatusCondition(&rep.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionFalse,
			Reason: reason, Message: msg, ObservedGeneration: rep.Generation})
	}
	rep.Status.Synced, rep.Status.ObservedGeneration = flotillav1.SyncedFalse, rep.Generation
	r.event(rep, corev1.EventTypeWarning, reason, "Apply", "%s", msg)
}

// setStatus composes plumber's applied[] and synced, the per-cluster state and the conditions.
func setStatus(rep *flotillav1.Replicator, results []placeResult, res clusters.Resolution) {
	st := &rep.Status
	st.ObservedGeneration = rep.Generation
	st.Applied, st.Clusters = nil, nil
	synced := 0
	var problems, held []string
	notReady := 0
	for _, pr := range results {
		st.Applied = append(st.Applied, pr.applied...)
		st.Clusters = append(st.Clusters, pr.sync)
		switch {
		case pr.sync.Synced:
			synced++
		case pr.sync.Held:
			held = append(held, pr.sync.Name)
		default:
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
		if len(res.Unknown)+len(res.Ambiguous) == 0 {
			cond.Reason = flotillav1.ReasonTargetDenied
		}
	case len(problems) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, flotillav1.ReasonApplyFailed
		cond.Message = fmt.Sprintf("%d of %d cluster(s) not synced: %s", len(problems), len(results), joinShort(problems))
		for _, pr := range results {
			if pr.problem != "" {
				cond.Reason = pr.problem
			}
		}
	case len(held) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, flotillav1.ReasonRolloutIncomplete
		cond.Message = fmt.Sprintf("%d of %d cluster(s) wait for their rollout wave: %s", len(held), len(results), joinShort(held))
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
		ready.Message = fmt.Sprintf("Replicas not ready (or not applied) in %d cluster(s)", max(notReady, len(problems)+len(held)))
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	meta.SetStatusCondition(&st.Conditions, HealthyCondition(rep.Generation, st.Clusters))
}

// HealthyCondition is a Replicator's Healthy condition from its clusters' state: True when every
// cluster is synced with the current generation and every object judged there is healthy; else
// False with, in this order, Unhealthy (an object judged unhealthy), NotSynced (a cluster where
// not everything is applied, so its health is not known) or RolloutIncomplete (a cluster waits
// for its wave).
func HealthyCondition(generation int64, clusters []flotillav1.ClusterSync) metav1.Condition {
	c := metav1.Condition{Type: flotillav1.ConditionHealthy, Status: metav1.ConditionTrue, ObservedGeneration: generation,
		Reason: flotillav1.ReasonHealthy}
	var unhealthy, unsynced, held []string
	judged := 0
	for _, cs := range clusters {
		switch {
		case cs.Held:
			held = append(held, cs.Name)
		case !cs.Synced:
			unsynced = append(unsynced, cs.Name+": "+cs.Message)
		case !cs.Healthy:
			why, _ := firstUnhealthy(cs.Health)
			unhealthy = append(unhealthy, cs.Name+": "+why)
		}
		if !cs.Held {
			judged += len(cs.Health)
		}
	}
	c.Status = metav1.ConditionFalse
	switch {
	case len(unhealthy) > 0:
		c.Reason, c.Message = flotillav1.ReasonUnhealthy, fmt.Sprintf("Not healthy in %d cluster(s): %s", len(unhealthy), joinShort(unhealthy))
	case len(unsynced) > 0:
		c.Reason, c.Message = flotillav1.ReasonNotSynced, fmt.Sprintf("Not synced in %d cluster(s): %s", len(unsynced), joinShort(unsynced))
	case len(held) > 0:
		c.Reason, c.Message = flotillav1.ReasonRolloutIncomplete, fmt.Sprintf("%d cluster(s) wait for their rollout wave: %s", len(held), joinShort(held))
	default:
		c.Status, c.Message = metav1.ConditionTrue, fmt.Sprintf("%d object(s) healthy in %d cluster(s)", judged, len(clusters))
	}
	return c
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
