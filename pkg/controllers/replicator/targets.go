package replicator

import (
	"fmt"
	"sort"
	"strings"

	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// Resolution is what a Replicator's targetCluster names mean now.
type Resolution struct {
	// Clusters are the secondaries to apply to, sorted.
	Clusters []string
	// Unknown and Ambiguous are names that match no cluster, or more than one.
	Unknown, Ambiguous []string
}

// Problem says what is wrong with the names, "" when nothing.
func (r Resolution) Problem() string {
	var parts []string
	if len(r.Unknown) > 0 {
		parts = append(parts, "unknown cluster(s) "+strings.Join(r.Unknown, ", "))
	}
	if len(r.Ambiguous) > 0 {
		parts = append(parts, "ambiguous name(s) "+strings.Join(r.Ambiguous, ", "))
	}
	return strings.Join(parts, "; ")
}

// Resolve maps targetCluster names to registered secondaries. A name may be a cluster (and
// ClusterDetector) name, a kubeconfig context name, or plumber's raw <cluster>.<user>. Empty means
// the primary only; ["*"] every usable secondary. Naming the primary is allowed (it always gets
// the resources) and adds no secondary.
func Resolve(names []string, snaps []clusters.Snapshot) Resolution {
	var res Resolution
	if len(names) == 1 && names[0] == "*" {
		for _, s := range snaps {
			if s.UsableSecondary() {
				res.Clusters = append(res.Clusters, s.Name)
			}
		}
		sort.Strings(res.Clusters)
		return res
	}
	chosen := map[string]bool{}
	for _, name := range names {
		matches := map[string]clusters.Snapshot{}
		for _, s := range snaps {
			if s.Name == name || s.Entry.Context == name || fmt.Sprintf("%s.%s", s.Entry.Cluster, s.Entry.User) == name {
				matches[s.Name] = s
			}
		}
		switch len(matches) {
		case 0:
			res.Unknown = append(res.Unknown, name)
		case 1:
			for _, s := range matches {
				if s.Role != clusters.RolePrimary {
					chosen[s.Name] = true
				}
			}
		default:
			res.Ambiguous = append(res.Ambiguous, name)
		}
	}
	for name := range chosen {
		res.Clusters = append(res.Clusters, name)
	}
	sort.Strings(res.Clusters)
	return res
}
