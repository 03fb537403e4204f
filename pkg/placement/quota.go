package placement

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// QuotaView is one FleetQuota as placement judges it: its overall limits and its limits per
// cluster, each keyed by the resource's name as a pod requests it (QuotaResource).
type QuotaView struct {
	Name     string
	Hard     corev1.ResourceList
	Clusters map[string]corev1.ResourceList
}

// QuotaUsage is what the proxies past the quota gate request: overall, and per cluster (a proxy
// whose cluster is not known yet counts overall only).
type QuotaUsage struct {
	Total      corev1.ResourceList
	PerCluster map[string]corev1.ResourceList
}

// QuotaRequest is a proxy that waits for quota: what it requests (QuotaRequests) and the clusters
// its node affinity allows.
type QuotaRequest struct {
	Requests corev1.ResourceList
	Clusters []string
}

// QuotaVerdict is the judgement on one waiting proxy: admitted (to Cluster when the quotas limit
// clusters, "" when the proxy keeps its clusters), or why it waits.
type QuotaVerdict struct {
	Admit   bool
	Cluster string
	Why     string
}

// QuotaResource is the name a quota's resource is counted under: requests.cpu is cpu, as in a
// ResourceQuota; pods, memory, ephemeral-storage and extended resources are as they are named.
func QuotaResource(name corev1.ResourceName) corev1.ResourceName {
	if s := string(name); strings.HasPrefix(s, "requests.") && s != "requests.storage" {
		return corev1.ResourceName(strings.TrimPrefix(s, "requests."))
	}
	return name
}

// QuotaLimits are a quota's limits under the names QuotaResource gives.
func QuotaLimits(hard corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range hard {
		out[QuotaResource(name)] = q.DeepCopy()
	}
	return out
}

// QuotaRequests is what a pod counts against a quota: its effective requests (the larger of its
// containers' sum and any init container, with overhead), one pod, and the devices its claims
// request (DeviceQuotaResource).
func QuotaRequests(pod *corev1.Pod) corev1.ResourceList {
	out := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	out[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
	if c, err := translate.ConstraintsOf(pod); err == nil {
		for name, n := range DeviceRequests(c.Devices) {
			out[name] = *resource.NewQuantity(n, resource.DecimalSI)
		}
	}
	return out
}

// DeviceQuotaResource is the name a quota counts the devices of a DeviceClass under, as
// Kubernetes' ResourceQuota does: <class>.deviceclass.resource.k8s.io/devices.
func DeviceQuotaResource(class string) corev1.ResourceName {
	return corev1.ResourceName(class + ".deviceclass.resource.k8s.io/devices")
}

// DeviceRequests counts the devices a pod's claims request, per class (DeviceQuotaResource): each
// request of an exact count counts that many; a request of all a node's devices, or a list of
// alternatives, counts by its largest count (one for all). A claim several pods name counts once
// for each of them.
func DeviceRequests(devices map[string]resourcev1.ResourceClaimSpec) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	count := func(r resourcev1.ExactDeviceRequest) int64 {
		if r.AllocationMode == resourcev1.DeviceAllocationModeAll {
			return 1
		}
		return max(r.Count, 1)
	}
	for _, spec := range devices {
		for _, r := range spec.Devices.Requests {
			if r.Exactly != nil {
				out[DeviceQuotaResource(r.Exactly.DeviceClassName)] += count(*r.Exactly)
			}
			most := map[string]int64{}
			for _, sub := range r.FirstAvailable {
				n := count(resourcev1.ExactDeviceRequest{AllocationMode: sub.AllocationMode, Count: sub.Count})
				most[sub.DeviceClassName] = max(most[sub.DeviceClassName], n)
			}
			for class, n := range most {
				out[DeviceQuotaResource(class)] += n
			}
		}
	}
	return out
}

// AdmitToQuotas judges the waiting proxies in order (oldest first, as the caller sorts them): each
// is admitted when every quota has room for it overall and, where quotas limit clusters, in one of
// its clusters (the one with the fewest pods counted, then by name), and its requests are then
// counted; one that does not fit waits, saying which quota, resource and numbers, and does not
// hold back a smaller one behind it. used is not changed; the usage after is returned.
func AdmitToQuotas(quotas []QuotaView, used QuotaUsage, waiting []QuotaRequest) ([]QuotaVerdict, QuotaUsage) {
	now := QuotaUsage{Total: used.Total.DeepCopy(), PerCluster: map[string]corev1.ResourceList{}}
	if now.Total == nil {
		now.Total = corev1.ResourceList{}
	}
	for c, l := range used.PerCluster {
		now.PerCluster[c] = l.DeepCopy()
	}
	perCluster := slices.ContainsFunc(quotas, func(q QuotaView) bool { return len(q.Clusters) > 0 })
	out := make([]QuotaVerdict, len(waiting))
	for i, w := range waiting {
		if why := overQuota(quotas, now.Total, w.Requests); why != "" {
			out[i].Why = why
			continue
		}
		cluster := ""
		if perCluster {
			var whys []string
			cluster, whys = roomIn(quotas, now.PerCluster, w)
			if cluster == "" {
				out[i].Why = strings.Join(whys, "; ")
				continue
			}
		}
		out[i] = QuotaVerdict{Admit: true, Cluster: cluster}
		now.Add(cluster, w.Requests)
	}
	return out, now
}

// overQuota says which quota has no room for req over used, "" when all have.
func overQuota(quotas []QuotaView, used, req corev1.ResourceList) string {
	for _, q := range quotas {
		if why := exceeds(q.Hard, used, req); why != "" {
			return fmt.Sprintf("FleetQuota %s: %s", q.Name, why)
		}
	}
	return ""
}

// roomIn is the cluster of w's where every quota's limit there has room (the one with the fewest
// pods counted, then by name), or why each has none.
func roomIn(quotas []QuotaView, used map[string]corev1.ResourceList, w QuotaRequest) (string, []string) {
	var fits, whys []string
	for _, c := range w.Clusters {
		why := ""
		for _, q := range quotas {
			if hard, ok := q.Clusters[c]; ok {
				if e := exceeds(hard, used[c], w.Requests); e != "" {
					why = fmt.Sprintf("FleetQuota %s in %s: %s", q.Name, c, e)
					break
				}
			}
		}
		if why != "" {
			whys = append(whys, why)
			continue
		}
		fits = append(fits, c)
	}
	if len(fits) == 0 {
		if len(w.Clusters) == 0 {
			whys = append(whys, "the proxy names no cluster yet")
		}
		return "", whys
	}
	pods := func(c string) int64 { q := used[c][corev1.ResourcePods]; return q.Value() }
	sort.SliceStable(fits, func(i, j int) bool {
		if pods(fits[i]) != pods(fits[j]) {
			return pods(fits[i]) < pods(fits[j])
		}
		return fits[i] < fits[j]
	})
	return fits[0], nil
}

// exceeds says which limit of hard req would pass over used, with the numbers, "" when none.
// A resource the limits do not name is not limited.
func exceeds(hard, used, req corev1.ResourceList) string {
	names := make([]string, 0, len(hard))
	for name := range hard {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, n := range names {
		name := corev1.ResourceName(n)
		asked, ok := req[name]
		if !ok || asked.IsZero() {
			continue
		}
		after := used[name].DeepCopy()
		after.Add(asked)
		if limit := hard[name]; after.Cmp(limit) > 0 {
			have := used[name]
			return fmt.Sprintf("%s %s/%s used, the pod asks for %s", name, have.String(), limit.String(), asked.String())
		}
	}
	return ""
}

func add(into, req corev1.ResourceList) {
	for name, q := range req {
		sum := into[name].DeepCopy()
		sum.Add(q)
		into[name] = sum
	}
}

// Add counts req overall and, when cluster is known, in that cluster.
func (u *QuotaUsage) Add(cluster string, req corev1.ResourceList) {
	if u.Total == nil {
		u.Total = corev1.ResourceList{}
	}
	add(u.Total, req)
	if cluster == "" {
		return
	}
	if u.PerCluster == nil {
		u.PerCluster = map[string]corev1.ResourceList{}
	}
	if u.PerCluster[cluster] == nil {
		u.PerCluster[cluster] = corev1.ResourceList{}
	}
	add(u.PerCluster[cluster], req)
}
