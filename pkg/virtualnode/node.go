package virtualnode

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

// NodeOptions are the parts of a virtual node that do not come from the secondary.
type NodeOptions struct {
	// Address is the InternalIP the node advertises (where its kubelet API is served).
	Address string
	// KubeletPort is the port of its kubelet API, its own (0: none).
	KubeletPort int32
	// PrimaryVersion is the primary's API server version; the node's kubelet version never
	// exceeds its minor.
	PrimaryVersion string
}

// AnnotationResourceMetricsPath tells metrics-server where a node's kubelet serves its resource
// metrics (metrics-server's own annotation, also set by kwok on its fake nodes). Virtual nodes no
// longer carry it (each has a kubelet port of its own, serving the standard path): it is removed
// from nodes an earlier version annotated.
const AnnotationResourceMetricsPath = "metrics.k8s.io/resource-metrics-path"

// Taints returns the taints a virtual node must carry.
func Taints() []corev1.Taint {
	return []corev1.Taint{{Key: flotillav1.TaintVirtualNode, Value: flotillav1.TaintVirtualNodeValue, Effect: corev1.TaintEffectNoSchedule}}
}

// UnregisteredTaint cordons the virtual node of a secondary whose context left the registration.
func UnregisteredTaint() corev1.Taint {
	return corev1.Taint{Key: flotillav1.TaintUnregistered, Effect: corev1.TaintEffectNoSchedule}
}

// Desired builds the virtual node of a secondary from its snapshot: spec, labels and status.
func Desired(s clusters.Snapshot, opts NodeOptions) *corev1.Node {
	name := flotillav1.VirtualNodeName(s.Name)
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: s.VirtualNodeLabels()},
		Spec:       corev1.NodeSpec{Taints: Taints()},
	}
	if s.Reason == flotillav1.ReasonNotRegistered {
		// Cordoned by Flotilla's own taint (a user's cordon stays the user's): no new proxy goes
		// there, the running ones and their delegates stay.
		n.Spec.Taints = append(n.Spec.Taints, UnregisteredTaint())
	}
	n.Status = Status(s, opts)
	return n
}

// Status is a virtual node's status: Ready from the secondary's health, capacity from its nodes.
func Status(s clusters.Snapshot, opts NodeOptions) corev1.NodeStatus {
	since := metav1.NewTime(s.LastTransition.Truncate(time.Second))
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: flotillav1.ReasonSecondaryRunning,
		Message: fmt.Sprintf("Secondary cluster %s answers its health probes", s.Name), LastTransitionTime: since}
	if s.Status != flotillav1.ClusterRunning {
		ready.Status, ready.Reason = corev1.ConditionFalse, flotillav1.ReasonSecondaryUnavailable
		ready.Message = fmt.Sprintf("Secondary cluster %s is not usable (%s): %s", s.Name, s.Reason, s.Message)
	}
	conditions := []corev1.NodeCondition{ready}
	for _, t := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		conditions = append(conditions, corev1.NodeCondition{Type: t, Status: corev1.ConditionFalse, Reason: "Virtual",
			Message: "Pressure is handled by the secondary's own nodes", LastTransitionTime: since})
	}
	capacity, allocatable := s.Capacity.Capacity, s.Capacity.Allocatable
	if !s.CapacitySynced || capacity == nil {
		// Nothing known yet: offer nothing rather than a guess.
		capacity = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}
		allocatable = capacity
	}
	capacity, allocatable = withDevices(capacity, allocatable, s.Capacity.DeviceCounts)
	osName, arch := s.Capacity.OS, s.Capacity.Arch
	if osName == "" {
		osName = "linux"
	}
	if arch == "" {
		arch = "amd64"
	}
	// Only the InternalIP: the API server prefers a Hostname address, and flotilla-<name> resolves nowhere.
	var addresses []corev1.NodeAddress
	if opts.Address != "" {
		addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: opts.Address}}
	}
	return corev1.NodeStatus{
		Capacity:        capacity.DeepCopy(),
		Allocatable:     allocatable.DeepCopy(),
		Conditions:      conditions,
		Addresses:       addresses,
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: opts.KubeletPort}},
		NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion:          CapVersion(s.Version, opts.PrimaryVersion),
			OperatingSystem:         osName,
			Architecture:            arch,
			OSImage:                 "Flotilla secondary cluster " + s.Name,
			ContainerRuntimeVersion: "flotilla://" + s.Version,
		},
	}
}

// withDevices adds the cluster's devices (DRA) per class to a virtual node's capacity (how many
// the class selects) and allocatable (how many are free), as devices.flotilla.dev/<class>: what
// `kubectl describe node` shows of a secondary's devices. No pod requests these names (a pod
// claims devices, which its secondary allocates); a class whose name does not fit a resource
// name (more than 63 characters) is shown on the ClusterDetector only.
func withDevices(capacity, allocatable corev1.ResourceList, counts []placement.DeviceClassCount) (corev1.ResourceList, corev1.ResourceList) {
	if len(counts) == 0 {
		return capacity, allocatable
	}
	capacity, allocatable = capacity.DeepCopy(), allocatable.DeepCopy()
	for _, c := range counts {
		if len(c.Class) > 63 {
			continue
		}
		name := corev1.ResourceName(flotillav1.DeviceResourcePrefix + c.Class)
		capacity[name] = *resource.NewQuantity(int64(c.Total), resource.DecimalSI)
		allocatable[name] = *resource.NewQuantity(int64(c.Free), resource.DecimalSI)
	}
	return capacity, allocatable
}

// CapVersion returns the secondary's version, capped at the primary's minor (tools that compare
// kubelet and API server versions refuse a kubelet newer than its API server).
func CapVersion(secondary, primary string) string {
	smaj, smin, ok1 := majorMinor(secondary)
	pmaj, pmin, ok2 := majorMinor(primary)
	switch {
	case !ok1 && ok2:
		return fmt.Sprintf("v%d.%d.0", pmaj, pmin)
	case !ok1:
		return "v0.0.0"
	case ok2 && (smaj > pmaj || (smaj == pmaj && smin > pmin)):
		return fmt.Sprintf("v%d.%d.0", pmaj, pmin)
	default:
		return secondary
	}
}

func majorMinor(v string) (int, int, bool) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	maj, err1 := strconv.Atoi(parts[0])
	min, err2 := strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	return maj, min, err1 == nil && err2 == nil
}
