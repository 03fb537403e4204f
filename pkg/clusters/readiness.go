package clusters

import (
	"errors"
	"fmt"
	"strings"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// Ready says whether this replica knows its clusters well enough to serve the webhook: the
// registration has been read, every registered cluster has been probed at least once (a probe
// that fails or times out counts: that cluster is then reported, not waited for), and every
// Running secondary's capacity is known. Before that, a replica behind the webhook's Service
// would refuse every elected pod ("capacity not known yet") during each rollout of the manager.
func (r *Registry) Ready() error {
	return readiness(r.Configured(), r.Snapshots())
}

func readiness(configured bool, snaps []Snapshot) error {
	if !configured {
		return errors.New("the registration Secret has not been read yet")
	}
	var waiting []string
	for _, s := range snaps {
		switch {
		case s.LastProbe.IsZero() && s.Reason != flotillav1.ReasonInvalidContext && s.Reason != flotillav1.ReasonNotRegistered:
			waiting = append(waiting, s.Name+" (not probed yet)")
		case s.Role == RoleSecondary && s.Status == flotillav1.ClusterRunning && s.Reason == "" && !s.CapacitySynced:
			waiting = append(waiting, s.Name+" (capacity not synced yet)")
		}
	}
	if len(waiting) > 0 {
		return fmt.Errorf("waiting for %s", strings.Join(waiting, ", "))
	}
	return nil
}
