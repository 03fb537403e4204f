package quota

import (
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/seal"
)

// inputs is what one pass over a namespace judges: its quotas, what the proxies past the gate
// use, and the proxies that wait, oldest first.
type inputs struct {
	quotas  []placement.QuotaView
	used    placement.QuotaUsage
	waiting []*corev1.Pod
}

// gather sorts the namespace's proxies into those that count (past the gate, or admitted by this
// controller though the cache does not show it yet) and those that wait for quota. A proxy
// still behind the placement gate has no clusters yet: it waits for placement first.
func gather(quotas []flotillav1.FleetQuota, proxies []corev1.Pod, admitted map[types.UID]string) inputs {
	in := inputs{used: placement.QuotaUsage{Total: corev1.ResourceList{}, PerCluster: map[string]corev1.ResourceList{}}}
	for _, q := range quotas {
		v := placement.QuotaView{Name: q.Name, Hard: placement.QuotaLimits(q.Spec.Hard)}
		for _, c := range q.Spec.Clusters {
			if v.Clusters == nil {
				v.Clusters = map[string]corev1.ResourceList{}
			}
			v.Clusters[c.Name] = placement.QuotaLimits(c.Hard)
		}
		in.quotas = append(in.quotas, v)
	}
	sort.Slice(in.quotas, func(i, j int) bool { return in.quotas[i].Name < in.quotas[j].Name })
	for i := range proxies {
		p := &proxies[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		cluster, counted := admitted[p.UID]
		switch {
		case counted:
		case p.Annotations[flotillav1.AnnotationQuota] != flotillav1.QuotaWaiting:
			cluster = clusterOf(p)
		case p.DeletionTimestamp.IsZero() && !placementGated(p):
			in.waiting = append(in.waiting, p)
			continue
		default:
			continue
		}
		req := placement.QuotaRequests(p)
		add(in.used.Total, req)
		if cluster != "" {
			if in.used.PerCluster[cluster] == nil {
				in.used.PerCluster[cluster] = corev1.ResourceList{}
			}
			add(in.used.PerCluster[cluster], req)
		}
	}
	sort.SliceStable(in.waiting, func(i, j int) bool {
		a, b := in.waiting[i], in.waiting[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	return in
}

// requests are the waiting proxies as placement judges them: what each asks for, and the
// clusters its sealed affinity allows.
func (in inputs) requests() []placement.QuotaRequest {
	out := make([]placement.QuotaRequest, len(in.waiting))
	for i, p := range in.waiting {
		out[i] = placement.QuotaRequest{Requests: placement.QuotaRequests(p), Clusters: seal.AllowedClusters(p)}
	}
	return out
}

// clusterOf is the cluster a counted proxy is in: its virtual node's, or the one cluster its
// admission allowed; "" while not known.
func clusterOf(p *corev1.Pod) string {
	if c, ok := strings.CutPrefix(p.Spec.NodeName, flotillav1.VirtualNodePrefix); ok {
		return c
	}
	if allowed := seal.AllowedClusters(p); len(allowed) == 1 {
		return allowed[0]
	}
	return ""
}

func placementGated(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == flotillav1.SchedulingGatePlacement })
}

func add(into, req corev1.ResourceList) {
	for name, q := range req {
		sum := into[name].DeepCopy()
		sum.Add(q)
		into[name] = sum
	}
}
