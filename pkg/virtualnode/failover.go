package virtualnode

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// FailoverTaint is put on the virtual node of a secondary that stayed unreachable: the primary's
// taint-eviction controller then evicts its proxies after their flotilla.dev/failover-seconds,
// and their controllers re-elect them to healthy secondaries.
func FailoverTaint() corev1.Taint {
	return corev1.Taint{Key: flotillav1.TaintUnreachable, Effect: corev1.TaintEffectNoExecute}
}

// Unreachable decides which secondaries get the failover taint: those Unknown for at least
// hysteresis, but none at all when that would be more than half of them (when most secondaries
// look dead, the primary is the one cut off, and evicting would only make things worse).
func Unreachable(snaps []clusters.Snapshot, now time.Time, hysteresis time.Duration) map[string]bool {
	total := 0
	var dead []string
	for _, s := range snaps {
		if !s.UsableSecondary() {
			continue
		}
		total++
		if s.Reason == flotillav1.ReasonNotRegistered || s.Reason == flotillav1.ReasonIdentityChanged {
			// Detached, or answering as another cluster: not dead. Its proxies and delegates are
			// left as they are until an operator decides (`cluster join` pins the new identity).
			continue
		}
		if s.Status != flotillav1.ClusterRunning && !s.LastTransition.IsZero() && now.Sub(s.LastTransition) >= hysteresis {
			dead = append(dead, s.Name)
		}
	}
	out := map[string]bool{}
	if len(dead) == 0 || len(dead)*2 > total {
		return out
	}
	for _, n := range dead {
		out[n] = true
	}
	return out
}

// KeepTainted adds to want the secondaries whose virtual node already carries the failover taint
// (tainted) and that have not answered since: a manager that restarts learns a cluster's state
// anew, and must not lift a taint it cannot yet judge (a crash-looping manager would postpone
// failover for ever).
func KeepTainted(want, tainted map[string]bool, snaps []clusters.Snapshot) map[string]bool {
	out := map[string]bool{}
	for k, v := range want {
		out[k] = v
	}
	for _, s := range snaps {
		if tainted[s.Name] && s.Status != flotillav1.ClusterRunning && s.Reason != flotillav1.ReasonNotRegistered &&
			s.Reason != flotillav1.ReasonIdentityChanged {
			out[s.Name] = true
		}
	}
	return out
}
