package clusters

import (
	"fmt"
	"sort"
	"strings"
)

// Resolution is what a list of cluster names (a Replicator's targetCluster) means now.
type Resolution struct {
	// Clusters are the secondaries named, sorted.
	Clusters []string
	// Every: the names were ["*"], every usable secondary.
	Every bool
	// Unknown and Ambiguous are names that match no cluster, or more than one.
	Unknown, Ambiguous []string
	// Denied are the clusters named that the namespace may not use, each as "<cluster>: <why>"
	// (Deny); they are not in Clusters.
	Denied []string
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
	parts = append(parts, r.Denied...)
	return strings.Join(parts, "; ")
}

// Deny takes out of Clusters those denied names with why (a namespace's cluster sets). A cluster
// named is listed in Denied; ["*"] means every cluster the namespace may use, so none is.
func (r Resolution) Deny(denied map[string]string) Resolution {
	out := r
	out.Clusters = nil
	out.Denied = append([]string(nil), r.Denied...)
	for _, c := range r.Clusters {
		why, ok := denied[c]
		switch {
		case !ok:
			out.Clusters = append(out.Clusters, c)
		case !r.Every:
			out.Denied = append(out.Denied, c+": "+why)
		}
	}
	return out
}

// Resolve maps cluster names (a Replicator's targetCluster) to registered secondaries. A name may be a cluster (and
// ClusterDetector) name, a kubeconfig context name, or plumber's raw <cluster>.<user>. Empty means
// the primary only; ["*"] every usable secondary. Naming the primary is allowed (it always gets
// the resources) and adds no secondary.
func Resolve(names []string, snaps []Snapshot) Resolution {
	var res Resolution
	if len(names) == 1 && names[0] == "*" {
		res.Every = true
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
		matches := map[string]Snapshot{}
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
				if s.Role != RolePrimary {
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
