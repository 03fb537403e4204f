package proxy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// showAllocation says on the proxy, once per delegate, which devices the secondary allocated to
// the delegate's claims (DRA), and on which node: an Event DevicesAllocated. The claims are read
// once the delegate is bound to a node (its scheduler allocates them before it binds), one GET
// each; until every one is read allocated, the delegate's next change (it starts, it runs) reads
// them again. Nothing else waits on it: a failed read is logged, not retried.
func (r *Reconciler) showAllocation(ctx context.Context, sec clusters.Secondary, proxy, delegate *corev1.Pod) {
	if len(delegate.Spec.ResourceClaims) == 0 || delegate.Spec.NodeName == "" {
		return
	}
	if shown, ok := r.allocations.Load(proxy.UID); ok && shown == delegate.UID {
		return
	}
	names := delegateClaimNames(delegate)
	if names == nil {
		return // the claims of its templates are not made yet
	}
	var parts []string
	for _, podClaim := range slices.Sorted(maps.Keys(names)) {
		var claim resourcev1.ResourceClaim
		if err := sec.Client.Get(ctx, client.ObjectKey{Namespace: delegate.Namespace, Name: names[podClaim]}, &claim); err != nil {
			log.FromContext(ctx).V(1).Info("Cannot read a delegate's claim to show its devices", "cluster", sec.Name, "claim", names[podClaim], "error", err.Error())
			return
		}
		a := claim.Status.Allocation
		if a == nil {
			return
		}
		parts = append(parts, fmt.Sprintf("claim %s (%s in %s): %s", podClaim, claim.Name, sec.Name, allocatedDevices(a)))
	}
	r.allocations.Store(proxy.UID, delegate.UID)
	r.event(proxy, corev1.EventTypeNormal, flotillav1.ReasonDevicesAllocated, "Allocate", "On node %s of cluster %s: %s",
		delegate.Spec.NodeName, sec.Name, strings.Join(parts, "; "))
}

// delegateClaimNames maps each claim of a delegate, by the pod's name for it, to the claim's name
// in its cluster: the name it names, or the one the secondary's claim controller gave the claim
// of its template (status.resourceClaimStatuses). Nil while one of those is not made yet.
func delegateClaimNames(delegate *corev1.Pod) map[string]string {
	made := map[string]string{}
	for _, s := range delegate.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			made[s.Name] = *s.ResourceClaimName
		}
	}
	out := map[string]string{}
	for _, rc := range delegate.Spec.ResourceClaims {
		switch {
		case rc.ResourceClaimName != nil:
			out[rc.Name] = *rc.ResourceClaimName
		case made[rc.Name] != "":
			out[rc.Name] = made[rc.Name]
		default:
			return nil
		}
	}
	return out
}

// allocatedDevices lists an allocation's devices, driver/pool/device by request.
func allocatedDevices(a *resourcev1.AllocationResult) string {
	out := make([]string, 0, len(a.Devices.Results))
	for _, d := range a.Devices.Results {
		out = append(out, fmt.Sprintf("%s=%s/%s/%s", d.Request, d.Driver, d.Pool, d.Device))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
