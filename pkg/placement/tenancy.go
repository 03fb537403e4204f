package placement

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// ClusterSetView is one ClusterSet as placement judges it: the clusters it names and its
// selector over the clusters' virtual node labels.
type ClusterSetView struct {
	Name     string
	Clusters []string
	Selector *metav1.LabelSelector
}

// Members are the clusters of views in the set. A selector that does not parse selects none
// (the set's status says why).
func (s ClusterSetView) Members(views []ClusterView) []string {
	var sel labels.Selector
	if s.Selector != nil {
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(s.Selector); err != nil {
			sel = nil
		}
	}
	var out []string
	for _, v := range views {
		if slices.Contains(s.Clusters, v.Name) || (sel != nil && sel.Matches(labels.Set(v.Labels))) {
			out = append(out, v.Name)
		}
	}
	return out
}

// Tenancy is what a namespace may use: the sets bound to it (by name), every set, and whether a
// namespace bound to none uses no cluster (the chart's tenancy.defaultDeny).
type Tenancy struct {
	Namespace   string
	Bound       []string
	Sets        []ClusterSetView
	DefaultDeny bool
}

// Deny marks each cluster the namespace may not use with why (ClusterView.Denied), naming its
// sets: placement then neither offers it nor waits for it. A namespace bound to no set uses
// every cluster unless DefaultDeny.
func (t Tenancy) Deny(views []ClusterView) []ClusterView {
	out := append([]ClusterView(nil), views...)
	if len(t.Bound) == 0 {
		if t.DefaultDeny {
			for i := range out {
				out[i].Denied = fmt.Sprintf("namespace %s is bound to no ClusterSet, and the fleet denies by default", t.Namespace)
			}
		}
		return out
	}
	allowed := map[string]bool{}
	var missing []string
	for _, name := range t.Bound {
		i := slices.IndexFunc(t.Sets, func(s ClusterSetView) bool { return s.Name == name })
		if i < 0 {
			missing = append(missing, name)
			continue
		}
		for _, c := range t.Sets[i].Members(views) {
			allowed[c] = true
		}
	}
	bound := append([]string(nil), t.Bound...)
	sort.Strings(bound)
	why := fmt.Sprintf("not in the ClusterSets bound to namespace %s (%s)", t.Namespace, strings.Join(bound, ", "))
	if len(missing) > 0 {
		sort.Strings(missing)
		why += fmt.Sprintf("; ClusterSet %s does not exist", strings.Join(missing, ", "))
	}
	for i := range out {
		if !allowed[out[i].Name] {
			out[i].Denied = why
		}
	}
	return out
}
