package placement

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// DeviceView is what placement knows of a secondary's devices (Dynamic Resource Allocation): its
// DeviceClasses, the ResourceSlices its drivers publish, and the devices its claims hold.
type DeviceView struct {
	Classes []*resourcev1.DeviceClass
	Slices  []*resourcev1.ResourceSlice
	// Allocated are the devices the cluster's claims hold (their status.allocation).
	Allocated sets.Set[structured.DeviceID]
	// Unknown says why the cluster's devices are not known ("" when they are): it does not serve
	// resource.k8s.io/v1, or Flotilla's identity there may not read it (joined before Flotilla
	// read devices).
	Unknown string
}

// DeviceClaims is what admission read of an elected pod's device claims.
type DeviceClaims struct {
	// Specs are what each claim requests, by the pod's name for it: its template's spec, or the
	// spec of the claim it names.
	Specs map[string]resourcev1.ResourceClaimSpec
	// Cluster is where pods already use Shared, a claim the pod names ("" when none does).
	Cluster, Shared string
}

// DeviceClassCount is how many devices of a class a cluster has, and how many are free.
type DeviceClassCount struct {
	Class       string
	Total, Free int
}

// deviceFeatures are the allocator features the secondaries' schedulers enable by default
// (Kubernetes 1.34 and later): admin access and prioritized lists.
var deviceFeatures = structured.Features{AdminAccess: true, PrioritizedList: true}

// celCache keeps the compiled selectors of the classes and requests placement has judged.
var celCache = cel.NewCache(256, cel.Features{})

type classLister []*resourcev1.DeviceClass

func (l classLister) List() ([]*resourcev1.DeviceClass, error) { return l, nil }

func (l classLister) Get(name string) (*resourcev1.DeviceClass, error) {
	for _, c := range l {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, apierrors.NewNotFound(resourcev1.Resource("deviceclasses"), name)
}

// requestedClasses are the device classes a claim's requests name, each once, sorted.
func requestedClasses(spec resourcev1.ResourceClaimSpec) []string {
	var out []string
	for _, r := range spec.Devices.Requests {
		if r.Exactly != nil {
			out = append(out, r.Exactly.DeviceClassName)
		}
		for _, sub := range r.FirstAvailable {
			out = append(out, sub.DeviceClassName)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// claimsOf are the pod's device claims as the allocator takes them, in the pod's claim names'
// order.
func claimsOf(pod *corev1.Pod, devices map[string]resourcev1.ResourceClaimSpec) []*resourcev1.ResourceClaim {
	names := make([]string, 0, len(devices))
	for name := range devices {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]*resourcev1.ResourceClaim, 0, len(names))
	for _, name := range names {
		spec := devices[name]
		// Named as the pod names the claim: only the reasons read it.
		out = append(out, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: name}, Spec: *spec.DeepCopy()})
	}
	return out
}

// deviceMisfit says why no node of a cluster can give the pod the devices its claims request
// ("" when one can), judged by Kubernetes' own allocator over the cluster's slices, classes and
// allocated devices on each node that takes the pod otherwise, and whether only for now (the
// devices it needs are there, but in use).
func deviceMisfit(ctx context.Context, cl ClusterView, pod *corev1.Pod, nodes []NodeView, devices map[string]resourcev1.ResourceClaimSpec) (string, bool) {
	if cl.Devices == nil || cl.Devices.Unknown != "" {
		why := "not known"
		if cl.Devices != nil {
			why = cl.Devices.Unknown
		}
		return "its devices cannot be judged: " + why, false
	}
	var absent []string
	for _, name := range slices.Sorted(maps.Keys(devices)) {
		for _, class := range requestedClasses(devices[name]) {
			if _, err := classLister(cl.Devices.Classes).Get(class); err != nil {
				absent = append(absent, fmt.Sprintf("device class %s absent (claim %s)", class, name))
			}
		}
	}
	if len(absent) > 0 {
		return strings.Join(slices.Compact(absent), ", "), false
	}
	claims := claimsOf(pod, devices)
	fits, err := allocatable(ctx, cl.Devices, cl.Devices.Allocated, nodes, claims)
	if err != nil {
		return "its devices cannot be judged: " + err.Error(), false
	}
	if fits {
		return "", false
	}
	// Would it fit were every device free? Then it waits for this cluster.
	everFits, err := allocatable(ctx, cl.Devices, nil, nodes, claims)
	if err != nil {
		return "its devices cannot be judged: " + err.Error(), false
	}
	return devicesShort(ctx, cl.Devices, nodes, claims, everFits), everFits
}

// allocatable says whether the allocator finds the claims' devices on one of the nodes, with the
// devices allocated already taken.
func allocatable(ctx context.Context, dv *DeviceView, allocated sets.Set[structured.DeviceID], nodes []NodeView, claims []*resourcev1.ResourceClaim) (bool, error) {
	if allocated == nil {
		allocated = sets.New[structured.DeviceID]()
	}
	alloc, err := structured.NewAllocator(ctx, deviceFeatures, structured.AllocatedState{AllocatedDevices: allocated}, classLister(dv.Classes), dv.Slices, celCache)
	if err != nil {
		return false, fmt.Errorf("allocator: %w", err)
	}
	for _, n := range nodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}}
		results, err := alloc.Allocate(ctx, node, claims)
		if err != nil {
			return false, err
		}
		if results != nil {
			return true, nil
		}
	}
	return false, nil
}

// devicesShort says what the claims lack on every node. For a request of an exact count it finds,
// with the allocator, the most devices of it one node could give ("needs 4 devices of class
// gpu.example.com (request gpu of claim train), at most 2 free on one node").
func devicesShort(ctx context.Context, dv *DeviceView, nodes []NodeView, claims []*resourcev1.ResourceClaim, everFits bool) string {
	var out []string
	for _, claim := range claims {
		for i, r := range claim.Spec.Devices.Requests {
			if r.Exactly == nil || r.Exactly.AllocationMode == resourcev1.DeviceAllocationModeAll {
				continue
			}
			count := max(r.Exactly.Count, 1)
			most := int64(0)
			for k := count - 1; k >= 1; k-- {
				one := claim.DeepCopy()
				one.Spec.Devices.Requests = []resourcev1.DeviceRequest{*r.DeepCopy()}
				one.Spec.Devices.Requests[0].Exactly.Count = k
				one.Spec.Devices.Constraints = nil
				if ok, err := allocatable(ctx, dv, dv.Allocated, nodes, []*resourcev1.ResourceClaim{one}); err == nil && ok {
					most = k
					break
				}
			}
			if most < count {
				out = append(out, fmt.Sprintf("needs %d devices of class %s (request %s of claim %s), at most %d free on one node",
					count, r.Exactly.DeviceClassName, claim.Spec.Devices.Requests[i].Name, claim.Name, most))
			}
		}
	}
	if len(out) == 0 {
		out = append(out, "no node has the devices its claims request free together")
	}
	if !everFits {
		out = append(out, "and no node has them at all")
	}
	return strings.Join(out, ", ")
}

// CountDevices is how many devices of each class a cluster's slices publish and how many of
// those are not allocated, by the classes' own selectors.
func CountDevices(ctx context.Context, dv *DeviceView) []DeviceClassCount {
	if dv == nil || dv.Unknown != "" {
		return nil
	}
	out := make([]DeviceClassCount, 0, len(dv.Classes))
	for _, class := range dv.Classes {
		c := DeviceClassCount{Class: class.Name}
		for _, s := range dv.Slices {
			for _, d := range s.Spec.Devices {
				if !classSelects(ctx, class, s.Spec.Driver, d) {
					continue
				}
				c.Total++
				if !dv.Allocated.Has(structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)) {
					c.Free++
				}
			}
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b DeviceClassCount) int { return strings.Compare(a.Class, b.Class) })
	return out
}

// classSelects says whether every CEL selector of a class matches a device (an expression that
// fails matches nothing).
func classSelects(ctx context.Context, class *resourcev1.DeviceClass, driver string, d resourcev1.Device) bool {
	for _, sel := range class.Spec.Selectors {
		if sel.CEL == nil {
			continue
		}
		expr := celCache.GetOrCompile(sel.CEL.Expression)
		if expr.Error != nil {
			return false
		}
		ok, _, err := expr.DeviceMatches(ctx, cel.Device{Driver: driver, Attributes: d.Attributes, Capacity: d.Capacity})
		if err != nil || !ok {
			return false
		}
	}
	return true
}
