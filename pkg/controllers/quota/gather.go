package quota

import (
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/seal"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// inputs is what one pass over a namespace judges: its quotas, what the proxies past the gate
// use, and the proxies that wait, oldest first.
type inputs struct {
	quotas  []placement.QuotaView
	used    placement.QuotaUsage
	waiting []*corev1.Pod
	// storage is, per waiting proxy, what its claims of class flotilla not counted yet request.
	storage map[types.UID]resource.Quantity
}

// requestsStorage is the name claims count under, as in a ResourceQuota.
const requestsStorage corev1.ResourceName = "requests.storage"

// gather sorts the namespace's proxies into those that count (past the gate, or admitted by this
// controller though the cache does not show it yet) and those that wait for quota. A proxy
// still behind the placement gate has no clusters yet: it waits for placement first.
//
// Claims of class flotilla count their requested storage once: when a proxy that counts uses
// them, or their cluster is known (they hold data there), in that cluster.
func gather(quotas []flotillav1.FleetQuota, proxies []corev1.Pod, claims []corev1.PersistentVolumeClaim, admitted map[types.UID]string) inputs {
	in := inputs{quotas: quotaViews(quotas), used: placement.QuotaUsage{Total: corev1.ResourceList{}, PerCluster: map[string]corev1.ResourceList{}},
		storage: map[types.UID]resource.Quantity{}}
	st := newStorage(claims)
	for name, c := range st.remote {
		if c.Annotations[flotillav1.AnnotationVolumeCluster] != "" {
			in.used.Add(st.count(name, ""))
		}
	}
	for i := range proxies {
		p := &proxies[i]
		cluster, counts, waits := standing(p, admitted)
		switch {
		case waits:
			in.waiting = append(in.waiting, p)
		case counts:
			for _, name := range translate.Claims(&p.Spec) {
				in.used.Add(st.count(name, cluster))
			}
			in.used.Add(cluster, placement.QuotaRequests(p))
		}
	}
	for _, p := range in.waiting {
		if storage := st.notCounted(p); !storage.IsZero() {
			in.storage[p.UID] = storage
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

// standing says whether a proxy counts against the quotas (and in which cluster, "" when not
// known) or waits for them; neither for one that ended, or is going while it waits, or waits for
// placement first.
func standing(p *corev1.Pod, admitted map[types.UID]string) (cluster string, counts, waits bool) {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return "", false, false
	}
	if c, ok := admitted[p.UID]; ok {
		return c, true, false
	}
	if p.Annotations[flotillav1.AnnotationQuota] != flotillav1.QuotaWaiting {
		return clusterOf(p), true, false
	}
	return "", false, p.DeletionTimestamp.IsZero() && !placementGated(p)
}

// quotaViews are the quotas as placement judges them, by name.
func quotaViews(quotas []flotillav1.FleetQuota) []placement.QuotaView {
	var out []placement.QuotaView
	for _, q := range quotas {
		v := placement.QuotaView{Name: q.Name, Hard: placement.QuotaLimits(q.Spec.Hard)}
		for _, c := range q.Spec.Clusters {
			if v.Clusters == nil {
				v.Clusters = map[string]corev1.ResourceList{}
			}
			v.Clusters[c.Name] = placement.QuotaLimits(c.Hard)
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// storage counts the namespace's claims of class flotilla, each once.
type storage struct {
	remote  map[string]*corev1.PersistentVolumeClaim
	counted map[string]bool
}

func newStorage(claims []corev1.PersistentVolumeClaim) *storage {
	st := &storage{remote: map[string]*corev1.PersistentVolumeClaim{}, counted: map[string]bool{}}
	for i := range claims {
		if c := &claims[i]; ptr.Deref(c.Spec.StorageClassName, "") == flotillav1.StorageClassRemote {
			st.remote[c.Name] = c
		}
	}
	return st
}

// count is the storage of claim name the first time it is counted, in the cluster that holds its
// data or else in cluster; nothing for a claim of another class, or counted already.
func (st *storage) count(name, cluster string) (string, corev1.ResourceList) {
	c, ok := st.remote[name]
	if !ok || st.counted[name] {
		return "", nil
	}
	st.counted[name] = true
	if held := c.Annotations[flotillav1.AnnotationVolumeCluster]; held != "" {
		cluster = held
	}
	return cluster, corev1.ResourceList{requestsStorage: c.Spec.Resources.Requests.Storage().DeepCopy()}
}

// notCounted is what a waiting proxy's claims of class flotilla not counted yet request.
func (st *storage) notCounted(p *corev1.Pod) resource.Quantity {
	var out resource.Quantity
	for _, name := range slices.Compact(slices.Sorted(slices.Values(translate.Claims(&p.Spec)))) {
		if c, ok := st.remote[name]; ok && !st.counted[name] {
			out.Add(*c.Spec.Resources.Requests.Storage())
		}
	}
	return out
}

// requests are the waiting proxies as placement judges them: what each asks for (its claims'
// storage not counted yet included), and the clusters its sealed affinity allows.
func (in inputs) requests() []placement.QuotaRequest {
	out := make([]placement.QuotaRequest, len(in.waiting))
	for i, p := range in.waiting {
		out[i] = placement.QuotaRequest{Requests: placement.QuotaRequests(p), Clusters: seal.AllowedClusters(p)}
		if storage, ok := in.storage[p.UID]; ok {
			out[i].Requests[requestsStorage] = storage
		}
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
