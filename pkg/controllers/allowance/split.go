package allowance

import (
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Part is one namespace's quota as the secondary holds it now.
type Part struct {
	Namespace string
	// Spec is the quota's spec.hard (nil: no quota yet); Counted its status.hard, what the API
	// server's admission holds pods to (it lags Spec until the quota controller syncs it); Used
	// its status.used.
	Spec, Counted, Used corev1.ResourceList
	// Wanting says the primary was refused there lately for want of room (it says so on the
	// namespace, flotilla.dev/allowance-wanted).
	Wanting bool
}

// QuotaResource is the ResourceQuota name of an allowance's resource: an extended resource is
// limited as requests.<name> (the only form a quota accepts for it), the others as written.
func QuotaResource(name corev1.ResourceName) corev1.ResourceName {
	if strings.Contains(string(name), "/") && !strings.HasPrefix(string(name), "requests.") && !strings.HasPrefix(string(name), "limits.") {
		return "requests." + name
	}
	return name
}

// QuotaHard is an allowance's Hard in the names of a ResourceQuota.
func QuotaHard(hard corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range hard {
		out[QuotaResource(name)] = q.DeepCopy()
	}
	return out
}

// Split is each namespace's new spec.hard under an allowance (hard, in quota names), in the
// order of parts. What is free (hard less what every namespace uses) is shared equally among the
// namespaces that want room, the others held to what they use; when none wants any, among all.
// Each namespace's target is its usage plus its share. A namespace's committed amount is the most of its
// spec, its counted limit and its usage: a lowered spec binds only once counted, and usage may
// sit above a limit lowered under it. Lowering is always written; raising only into the room
// hard leaves over the committed amounts, namespaces in name order, so at every moment the
// limits the API server may apply add up to no more than hard.
func Split(hard corev1.ResourceList, parts []Part) []corev1.ResourceList {
	out := make([]corev1.ResourceList, len(parts))
	for i := range parts {
		out[i] = corev1.ResourceList{}
	}
	names := slices.Sorted(maps.Keys(hard))
	order := make([]int, len(parts))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return parts[order[a]].Namespace < parts[order[b]].Namespace })
	for _, name := range names {
		milli := name == corev1.ResourceCPU || name == corev1.ResourceRequestsCPU || name == corev1.ResourceLimitsCPU
		units := func(l corev1.ResourceList) int64 {
			q, ok := l[name]
			if !ok {
				return 0
			}
			if milli {
				return q.MilliValue()
			}
			return q.Value()
		}
		limit := units(hard)
		used, committed := make([]int64, len(parts)), make([]int64, len(parts))
		var usedSum int64
		for i, p := range parts {
			used[i] = units(p.Used)
			committed[i] = max(units(p.Spec), units(p.Counted), used[i])
			usedSum += used[i]
		}
		free := max(limit-usedSum, 0)
		sharing := order
		if wanting := wantingOf(parts, order); len(wanting) > 0 {
			sharing = wanting
		}
		target := slices.Clone(used)
		for k, i := range sharing {
			share := free / int64(len(sharing))
			if int64(k) < free%int64(len(sharing)) {
				share++ // the remainder to the first names: the shares add up to free
			}
			target[i] += share
		}
		// Lowered (or kept) first; what they still commit is counted against hard.
		var held int64
		for i := range parts {
			if target[i] <= committed[i] {
				out[i][name] = quantity(target[i], milli)
				held += max(target[i], units(parts[i].Counted), used[i])
			} else {
				held += committed[i]
			}
		}
		room := max(limit-held, 0)
		for _, i := range order {
			if target[i] <= committed[i] {
				continue
			}
			grant := min(target[i]-committed[i], room)
			room -= grant
			out[i][name] = quantity(committed[i]+grant, milli)
		}
	}
	return out
}

// wantingOf is the indexes of the parts that want room, in the given order.
func wantingOf(parts []Part, order []int) []int {
	var out []int
	for _, i := range order {
		if parts[i].Wanting {
			out = append(out, i)
		}
	}
	return out
}

func quantity(v int64, milli bool) resource.Quantity {
	if milli {
		return *resource.NewMilliQuantity(v, resource.DecimalSI)
	}
	return *resource.NewQuantity(v, resource.DecimalSI)
}
