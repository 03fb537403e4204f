package replicator

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/replication"
)

// Waves orders the primary and the resolved targets in the waves of a rollout: wave i+1 is
// rollout.waves[i] (its names resolved as targetCluster's, the primary by the name primary; a
// name that resolves to no target adds nothing, and a cluster counts in its first wave only),
// and a last wave holds the primary, unless named, and the targets named in no wave. Without a
// rollout there is one wave: the primary, then every target. It is pure: resolve maps one name
// to the clusters it names.
func Waves(rollout *flotillav1.Rollout, targets []string, resolve func(name string) []string) [][]string {
	if rollout == nil {
		return [][]string{append([]string{PrimaryName}, targets...)}
	}
	placed := map[string]bool{}
	out := make([][]string, 0, len(rollout.Waves)+1)
	for _, w := range rollout.Waves {
		wave := []string{}
		for _, name := range w.Clusters {
			named := []string{PrimaryName}
			if name != flotillav1.RolloutPrimary {
				named = resolve(name)
			}
			for _, c := range named {
				if (c == PrimaryName || slices.Contains(targets, c)) && !placed[c] {
					placed[c] = true
					wave = append(wave, c)
				}
			}
		}
		out = append(out, wave)
	}
	var rest []string
	for _, c := range append([]string{PrimaryName}, targets...) {
		if !placed[c] {
			rest = append(rest, c)
		}
	}
	return append(out, rest)
}

// waveGate is the first wave that is not healthy with the current generation, which the later
// waves wait for.
type waveGate struct {
	// Wave is its number (0: every wave is healthy); Clusters its clusters.
	Wave     int
	Clusters []string
	// Why says what is not healthy there (the first cluster); Failing that it will not get
	// better by waiting (a rollout on it is blocked).
	Why     string
	Failing bool
}

// gateOf is the gate a wave's results make: zero when every cluster there is synced and healthy.
func gateOf(wave int, results []placeResult) waveGate {
	g := waveGate{Wave: wave}
	for _, pr := range results {
		g.Clusters = append(g.Clusters, pr.sync.Name)
	}
	for _, pr := range results {
		switch {
		case !pr.sync.Synced:
			g.Why = pr.sync.Name + ": not synced: " + pr.sync.Message
		case !pr.sync.Healthy:
			why, failing := firstUnhealthy(pr.sync.Health)
			g.Why, g.Failing = pr.sync.Name+": "+why, failing
		default:
			continue
		}
		return g
	}
	return waveGate{}
}

// rolloutOutcome is what a pass did with the waves.
type rolloutOutcome struct {
	gate waveGate
	// held are the clusters that keep an older generation.
	held []string
}

// ProgressingCondition is the Progressing condition of a Replicator with a rollout: True and
// RolledOut when no cluster waits; False and RolloutBlocked when the waves wait on one that fails;
// True and WaitingForWave while they wait on one that is not healthy yet.
func ProgressingCondition(generation int64, gate waveGate, held []string) metav1.Condition {
	c := metav1.Condition{Type: flotillav1.ConditionProgressing, Status: metav1.ConditionTrue, ObservedGeneration: generation,
		Reason: flotillav1.ReasonRolledOut, Message: fmt.Sprintf("Every wave has generation %d", generation)}
	if len(held) == 0 {
		return c
	}
	waiting := fmt.Sprintf("the %s wave (%s) is not healthy with generation %d: %s; %s keep their generation",
		Ordinal(gate.Wave), strings.Join(gate.Clusters, ", "), generation, gate.Why, strings.Join(held, ", "))
	c.Reason, c.Message = flotillav1.ReasonWaitingForWave, "Waiting: "+waiting
	if gate.Failing {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, flotillav1.ReasonRolloutBlocked, "Blocked: "+waiting
	}
	return c
}

// applyInWaves applies to the clusters wave by wave (Waves). A wave whose clusters are not all
// synced and healthy holds the later ones: a cluster there that has not had the current
// generation yet is left as it is and reported from the previous status; one that already has it
// is applied (it only repairs drift). Without a rollout it is today's single wave.
func (r *Reconciler) applyInWaves(ctx context.Context, in replication.Inputs, targets []string) ([]placeResult, rolloutOutcome) {
	rep := in.Replicator
	resolve := func(name string) []string { return clusters.Resolve([]string{name}, r.Registry.Snapshots()).Clusters }
	waves := Waves(rep.Spec.Rollout, targets, resolve)
	prev := map[string]flotillav1.ClusterSync{}
	for _, c := range rep.Status.Clusters {
		prev[c.Name] = c
	}
	var out []placeResult
	var o rolloutOutcome
	for i, wave := range waves {
		var now, held, fresh []string
		for _, c := range wave {
			switch {
			case o.gate.Wave != 0 && prev[c].ObservedGeneration != rep.Generation:
				held = append(held, c)
			case prev[c].ObservedGeneration != rep.Generation:
				fresh = append(fresh, c)
				now = append(now, c)
			default:
				now = append(now, c)
			}
		}
		results := r.applyClusters(ctx, in, now)
		if o.gate.Wave == 0 {
			o.gate = gateOf(i+1, results)
		}
		for _, c := range held {
			results = append(results, heldResult(rep, prev, c, o.gate))
		}
		o.held = append(o.held, held...)
		if rep.Spec.Rollout != nil {
			for j := range results {
				results[j].sync.Wave = int32(i + 1) //nolint:gosec // at most 11 waves
			}
			if len(fresh) > 0 {
				r.event(rep, corev1.EventTypeNormal, flotillav1.ReasonWaveApplied, "Rollout", "The %s wave: generation %d applied in %s",
					Ordinal(i+1), rep.Generation, strings.Join(fresh, ", "))
			}
		}
		out = append(out, results...)
	}
	// The primary first, then the targets in their order, as without waves.
	order := append([]string{PrimaryName}, targets...)
	slices.SortStableFunc(out, func(a, b placeResult) int {
		return slices.Index(order, a.sync.Name) - slices.Index(order, b.sync.Name)
	})
	return out, o
}

// applyClusters applies to the primary, if among them, then to the others in parallel.
func (r *Reconciler) applyClusters(ctx context.Context, in replication.Inputs, names []string) []placeResult {
	var out []placeResult
	if slices.Contains(names, PrimaryName) {
		out = append(out, r.applyPrimary(ctx, in))
	}
	others := slices.DeleteFunc(slices.Clone(names), func(c string) bool { return c == PrimaryName })
	return append(out, r.applyTargets(ctx, in, others)...)
}

// heldResult reports a cluster that waits for its wave from the previous status: what it had
// applied stays listed (so nothing there is pruned), marked held and not synced.
func heldResult(rep *flotillav1.Replicator, prev map[string]flotillav1.ClusterSync, cluster string, gate waveGate) placeResult {
	sync, ok := prev[cluster]
	if !ok {
		sync = flotillav1.ClusterSync{Name: cluster, Role: roleOf(cluster == PrimaryName)}
	}
	sync.Synced, sync.Held = false, true
	sync.Message = fmt.Sprintf("held: waits for the %s wave (%s) to be healthy with generation %d", Ordinal(gate.Wave), strings.Join(gate.Clusters, ", "), rep.Generation)
	var applied []flotillav1.AppliedResource
	for _, a := range rep.Status.Applied {
		if a.Cluster == cluster {
			applied = append(applied, a)
		}
	}
	return placeResult{sync: sync, applied: applied}
}

// setProgressing sets (with a rollout) or removes the Progressing condition, and records a
// Warning Event when the rollout becomes blocked.
func (r *Reconciler) setProgressing(rep *flotillav1.Replicator, o rolloutOutcome) {
	if rep.Spec.Rollout == nil {
		meta.RemoveStatusCondition(&rep.Status.Conditions, flotillav1.ConditionProgressing)
		return
	}
	c := ProgressingCondition(rep.Generation, o.gate, o.held)
	was := meta.FindStatusCondition(rep.Status.Conditions, flotillav1.ConditionProgressing)
	if c.Reason == flotillav1.ReasonRolloutBlocked && (was == nil || was.Reason != c.Reason || was.ObservedGeneration != c.ObservedGeneration) {
		r.event(rep, corev1.EventTypeWarning, flotillav1.ReasonRolloutBlocked, "Rollout", "%s", c.Message)
	}
	meta.SetStatusCondition(&rep.Status.Conditions, c)
}

// Ordinal names a wave by its place: 1st, 2nd, 3rd, 4th ... 11th, 12th, 13th, 21st.
func Ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}
