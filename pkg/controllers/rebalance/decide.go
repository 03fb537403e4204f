package rebalance

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

// Returns follows which secondaries failed over and came back.
type Returns struct {
	// tainted are the clusters whose virtual node carries the failover taint now.
	tainted map[string]bool
	// back is when each cluster that was tainted lost its taint, until its rebalance is done.
	back map[string]time.Time
}

// Observe records the virtual nodes' failover taints at now: a cluster whose taint went is back
// from then on.
func (r *Returns) Observe(nodes []corev1.Node, now time.Time) {
	if r.tainted == nil {
		r.tainted, r.back = map[string]bool{}, map[string]time.Time{}
	}
	seen := map[string]bool{}
	for i := range nodes {
		n := &nodes[i]
		cluster := n.Labels[flotillav1.LabelCluster]
		if cluster == "" {
			continue
		}
		seen[cluster] = true
		switch tainted := failoverTainted(n); {
		case tainted:
			r.tainted[cluster] = true
			delete(r.back, cluster) // failed over again: its return counts from the next one
		case r.tainted[cluster]:
			delete(r.tainted, cluster)
			r.back[cluster] = now
		}
	}
	for c := range r.tainted {
		if !seen[c] {
			delete(r.tainted, c) // its virtual node is gone (removed)
		}
	}
	for c := range r.back {
		if !seen[c] {
			delete(r.back, c)
		}
	}
}

// Due is the clusters back and Ready for at least after at now: their rebalance runs.
func (r *Returns) Due(nodes []corev1.Node, now time.Time, after time.Duration) map[string]bool {
	ready := map[string]bool{}
	for i := range nodes {
		if nodeReady(&nodes[i]) && !nodes[i].Spec.Unschedulable {
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

// Done forgets a cluster whose rebalance found nothing more to move.
func (r *Returns) Done(cluster string) { delete(r.back, cluster) }

func failoverTainted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == flotillav1.TaintUnreachable && t.Effect == corev1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
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
