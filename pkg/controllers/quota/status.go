package quota

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

// writeStatus writes a quota's usage when it changed.
func (r *Reconciler) writeStatus(ctx context.Context, q *flotillav1.FleetQuota, used placement.QuotaUsage, waiting int32) error {
	base := q.DeepCopy()
	setStatus(q, used, waiting)
	if apiequality.Semantic.DeepEqual(base.Status, q.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, q, client.MergeFrom(base)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("writing the status of FleetQuota %s/%s: %w", q.Namespace, q.Name, err))
	}
	return nil
}

// setStatus is a quota's status from the usage counted: used against each limit it names, overall
// and per cluster (those it limits and those its pods are in), the pods waiting for it, a
// summary for kubectl get, and Exhausted while a resource is at its limit.
func setStatus(q *flotillav1.FleetQuota, used placement.QuotaUsage, waiting int32) {
	st := &q.Status
	st.Used = against(q.Spec.Hard, used.Total)
	st.Waiting = waiting
	st.ObservedGeneration = q.Generation
	limits := map[string]corev1.ResourceList{}
	for _, c := range q.Spec.Clusters {
		limits[c.Name] = c.Hard
	}
	names := map[string]bool{}
	for c := range limits {
		names[c] = true
	}
	for c := range used.PerCluster {
		names[c] = true
	}
	st.Clusters = nil
	for _, c := range sortedKeys(names) {
		hard, ok := limits[c]
		shown := hard
		if !ok {
			shown = q.Spec.Hard // no limit of its own: its share of the overall ones
		}
		st.Clusters = append(st.Clusters, flotillav1.ClusterQuotaStatus{Name: c, Hard: hard.DeepCopy(), Used: against(shown, used.PerCluster[c])})
	}
	var parts, full []string
	for _, name := range sortedNames(q.Spec.Hard) {
		u, h := st.Used[name], q.Spec.Hard[name]
		parts = append(parts, fmt.Sprintf("%s %s/%s", name, u.String(), h.String()))
		if u.Cmp(h) >= 0 {
			full = append(full, fmt.Sprintf("%s %s/%s", name, u.String(), h.String()))
		}
	}
	for _, c := range q.Spec.Clusters {
		u := against(c.Hard, used.PerCluster[c.Name])
		for _, name := range sortedNames(c.Hard) {
			if uu, h := u[name], c.Hard[name]; uu.Cmp(h) >= 0 {
				full = append(full, fmt.Sprintf("in %s %s %s/%s", c.Name, name, uu.String(), h.String()))
			}
		}
	}
	st.Summary = strings.Join(parts, ", ")
	cond := metav1.Condition{Type: flotillav1.ConditionExhausted, Status: metav1.ConditionFalse, Reason: "Room",
		Message: "Every limit has room", ObservedGeneration: q.Generation}
	if len(full) > 0 {
		cond.Status, cond.Reason = metav1.ConditionTrue, "AtLimit"
		cond.Message = "At the limit: " + strings.Join(full, ", ") + fmt.Sprintf("; %d pod(s) waiting", waiting)
	}
	meta.SetStatusCondition(&st.Conditions, cond)
}

// against is what used holds of each resource hard names, under hard's own names (requests.cpu
// stays requests.cpu), zero where nothing is used.
func against(hard, used corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name := range hard {
		q, ok := used[placement.QuotaResource(name)]
		if !ok {
			q = *resource.NewQuantity(0, resource.DecimalSI)
		}
		out[name] = q.DeepCopy()
	}
	return out
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
