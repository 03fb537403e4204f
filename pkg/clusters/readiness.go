package clusters

import (
	"errors"
	"fmt"
	"strings"
	"time"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// Ready says whether this replica knows its clusters well enough to serve the webhook: the
// registration has been read, every registered cluster has been probed at least once (a probe
// that fails or times out counts: that cluster is then reported, not waited for), and every
// Running secondary's capacity is known, or has not synced within CapacitySyncDeadline of its
// becoming Running. Before that, a replica behind the webhook's Service would refuse every
// elected pod ("capacity not known yet") during each rollout of the manager.
//
// Once it has answered nil it always does: a secondary that comes back, relists, or never
// finishes its LIST never takes a Ready replica out of the webhook's Service. (With every replica
// out of it and failurePolicy Fail, elected pods for every cluster were refused until the slowest
// relist ended.) The webhook itself judges each secondary by its own snapshot.
func (r *Registry) Ready() error {
	if r.ready.Load() {
		return nil
	}
	err := readiness(r.Configured(), r.Snapshots(), r.opts.Clock.Now(), r.opts.CapacitySyncDeadline)
	if err == nil {
		r.ready.Store(true)
	}
	return err
}

func readiness(configured bool, snaps []Snapshot, now time.Time, deadline time.Duration) error {
	if !configured {
		return errors.New("the registration Secret has not been read yet")
	}
	var waiting []string
	for _, s := range snaps {
		switch {
		case s.LastProbe.IsZero() && s.Reason != flotillav1.ReasonInvalidContext && s.Reason != flotillav1.ReasonNotRegistered:
			waiting = append(waiting, s.Name+" (not probed yet)")
		case s.Role == RoleSecondary && s.Status == flotillav1.ClusterRunning && s.Reason == "" && !s.CapacitySynced &&
			now.Sub(s.LastTransition) < deadline:
			waiting = append(waiting, s.Name+" (capacity not synced yet)")
		}
	}
	if len(waiting) > 0 {
		return fmt.Errorf("waiting for %s", strings.Join(waiting, ", "))
	}
	return nil
}
