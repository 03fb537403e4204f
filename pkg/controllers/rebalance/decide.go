package rebalance

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

// Returns follows which secondaries came back from a failover: their virtual nodes'
// flotilla.dev/back-since, which the virtual node manager writes when it lifts the failover taint,
// so that a return outlives a leader change or a restart.
type Returns struct {
	// back is when each cluster came back, while its rebalance is not done.
	back map[string]time.Time
	// stamps are the back-since values observed; done those whose rebalance finished (until the
	// annotation's removal shows).
	stamps, done map[string]string
}

// Observe reads the virtual nodes' returns: a cluster whose node carries flotilla.dev/back-since
// and not the failover taint is back since then, unless its rebalance of that return is done.
func (r *Returns) Observe(nodes []corev1.Node) {
	if r.done == nil {
		r.done = map[string]string{}
	}
	r.back, r.stamps = map[string]time.Time{}, map[string]string{}
	seen := map[string]bool{}
	for i := range nodes {
		n := &nodes[i]
		cluster := n.Labels[flotillav1.LabelCluster]
		if cluster == "" {
			continue
		}
		seen[cluster] = true
		stamp, ok := n.Annotations[flotillav1.AnnotationBackSince]
		if placement.FailoverTainted(n.Spec.Taints) || !ok {
			delete(r.done, cluster) // failed over again (or never): its next return counts
			continue
		}
		at, err := time.Parse(time.RFC3339, stamp)
		if err != nil || r.done[cluster] == stamp {
			continue
		}
		r.back[cluster], r.stamps[cluster] = at, stamp
	}
	for c := range r.done {
		if !seen[c] {
			delete(r.done, c) // its virtual node is gone (removed)
		}
	}
}

// Due is the clusters back and Ready for at least after at now: their rebalance runs.
func (r *Returns) Due(nodes []corev1.Node, now time.Time, after time.Duration) map[string]bool {
	ready := map[string]bool{}
	for i := range nodes {
		if placement.NodeReady(&nodes[i]) && !nodes[i].Spec.Unschedulable {
			ready[nodes[i].Labels[flotillav1.LabelCluster]] = true
		}
	}
	out := map[string]bool{}
	for c, t := range r.back {
		if ready[c] && now.Sub(t) >= after {
			out[c] = true
		}
	}
	return out
}

// Done records that a cluster's rebalance of its return found nothing more to move, and returns
// that return's stamp (the rebalancer removes it from the virtual node).
func (r *Returns) Done(cluster string) string {
	stamp := r.stamps[cluster]
	r.done[cluster] = stamp
	delete(r.back, cluster)
	return stamp
}

// Next is the move of a controller's plan that brings a pod back to a due cluster (nil: none).
func Next(moves []placement.Move, due map[string]bool) *placement.Move {
	for i := range moves {
		if due[moves[i].To] {
			return &moves[i]
		}
	}
	return nil
}
