package placement_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/placement/placementtest"
)

const gpuDriver = "gpu.example.com"

// gpuSlice is the slice a driver publishes for one node: n devices, each with its memory.
func gpuSlice(node string, n int, memory string) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: gpuDriver, NodeName: ptr.To(node), Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1}}}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i),
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse(memory)}}})
	}
	return s
}

func gpuClass() *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: gpuDriver}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + gpuDriver + `"`}}}}}
}

func gpuCluster(name string, dv *placement.DeviceView, nodes ...string) placement.ClusterView {
	cl := placement.ClusterView{Name: name, Ready: true, Labels: map[string]string{flotillav1.LabelCluster: name}, Devices: dv}
	for _, n := range nodes {
		cl.Nodes = append(cl.Nodes, placement.NodeView{Name: n, Free: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}})
	}
	return cl
}

// gpuClaim requests count devices of the GPU class, with at least memory each ("" for any).
func gpuClaim(count int64, memory string) resourcev1.ResourceClaimSpec {
	r := resourcev1.DeviceRequest{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: gpuDriver, Count: count,
		AllocationMode: resourcev1.DeviceAllocationModeExactCount}}
	if memory != "" {
		r.Exactly.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: `device.capacity["` + gpuDriver + `"].memory.compareTo(quantity("` + memory + `")) >= 0`}}}
	}
	return resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{r}}}
}

// Device claims are judged by Kubernetes' allocator over each cluster's slices, classes and
// allocated devices, per node: a cluster fits when one node takes every claim; one whose devices
// are only in use is waited for; one without the class, or without a node that ever has enough,
// is not; the reasons say which.
func TestDeviceClaimsAreJudgedByTheAllocatorPerNode(t *testing.T) {
	twoByTwo := &placement.DeviceView{Classes: []*resourcev1.DeviceClass{gpuClass()},
		Slices: []*resourcev1.ResourceSlice{gpuSlice("eu-0", 2, "40Gi"), gpuSlice("eu-1", 2, "80Gi")}, Allocated: sets.New[structured.DeviceID]()}
	taken := &placement.DeviceView{Classes: twoByTwo.Classes, Slices: twoByTwo.Slices,
		Allocated: sets.New(structured.MakeDeviceID(gpuDriver, "eu-0", "gpu-0"), structured.MakeDeviceID(gpuDriver, "eu-1", "gpu-1"))}
	noClass := &placement.DeviceView{Allocated: sets.New[structured.DeviceID]()}
	tests := map[string]struct {
		devices           map[string]resourcev1.ResourceClaimSpec
		eu                *placement.DeviceView
		feasible, waiting []string
		why               []string
	}{
		"two devices on one node: eu": {devices: map[string]resourcev1.ResourceClaimSpec{"gpus": gpuClaim(2, "")}, eu: twoByTwo, feasible: []string{"eu"},
			why: nil},
		"a selector on memory picks the node that has it": {devices: map[string]resourcev1.ResourceClaimSpec{"gpus": gpuClaim(2, "80Gi")}, eu: twoByTwo, feasible: []string{"eu"}},
		"four devices: no node ever has them": {devices: map[string]resourcev1.ResourceClaimSpec{"gpus": gpuClaim(4, "")}, eu: twoByTwo,
			why: []string{"eu: needs 4 devices of class gpu.example.com (request gpu of claim gpus), at most 2 free on one node, and no node has them at all",
				"us: device class gpu.example.com absent (claim gpus)"}},
		"two devices, one free per node: waits for eu": {devices: map[string]resourcev1.ResourceClaimSpec{"gpus": gpuClaim(2, "")}, eu: taken, waiting: []string{"eu"},
			why: []string{"eu: needs 2 devices of class gpu.example.com (request gpu of claim gpus), at most 1 free on one node"}},
		"two claims of one device each share a node": {devices: map[string]resourcev1.ResourceClaimSpec{"a": gpuClaim(1, "80Gi"), "b": gpuClaim(1, "80Gi")}, eu: twoByTwo,
			feasible: []string{"eu"}},
		"the class absent everywhere": {devices: map[string]resourcev1.ResourceClaimSpec{"gpus": gpuClaim(1, "")}, eu: noClass,
			why: []string{"eu: device class gpu.example.com absent (claim gpus)"}},
		"devices not known": {devices: map[string]resourcev1.ResourceClaimSpec{"gpus": gpuClaim(1, "")}, eu: &placement.DeviceView{Unknown: "resource.k8s.io/v1 not served"},
			why: []string{"eu: its devices cannot be judged: resource.k8s.io/v1 not served"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clusters := []placement.ClusterView{gpuCluster("eu", tc.eu, "eu-0", "eu-1"), gpuCluster("us", noClass, "us-0")}
			pod := placementtest.Elected()
			c := placement.DelegateConstraints(pod)
			c.Devices = tc.devices
			got, err := placement.Decide(t.Context(), pod, c, clusters, func([]int64) int { return 0 })
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Feasible, tc.feasible) || !reflect.DeepEqual(got.Waiting, tc.waiting) {
				t.Errorf("feasible %v waiting %v, want %v %v (why %q)", got.Feasible, got.Waiting, tc.feasible, tc.waiting, got.Why)
			}
			for _, want := range tc.why {
				if !strings.Contains(got.Why, want) {
					t.Errorf("why %q lacks %q", got.Why, want)
				}
			}
		})
	}
}

// A claim shared by pods already in one cluster keeps the next pod there.
func TestASharedClaimKeepsItsPodsInOneCluster(t *testing.T) {
	dv := &placement.DeviceView{Classes: []*resourcev1.DeviceClass{gpuClass()}, Slices: []*resourcev1.ResourceSlice{gpuSlice("eu-0", 2, "40Gi"), gpuSlice("us-0", 2, "40Gi")}}
	clusters := []placement.ClusterView{gpuCluster("eu", dv, "eu-0"), gpuCluster("us", dv, "us-0")}
	pod := placementtest.Elected()
	c := placement.DelegateConstraints(pod)
	c.Devices = map[string]resourcev1.ResourceClaimSpec{"shared": gpuClaim(1, "")}
	c.ClaimCluster, c.SharedClaim = "us", "nic"
	got, err := placement.Decide(t.Context(), pod, c, clusters, func([]int64) int { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	if got.Cluster != "us" || !reflect.DeepEqual(got.Feasible, []string{"us"}) {
		t.Errorf("%+v, want us alone", got)
	}
}

// The counts per class are the class's own selectors over the slices, free those not allocated.
func TestCountDevicesPerClass(t *testing.T) {
	other := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "nic.example.com"}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "nic.example.com"`}}}}}
	dv := &placement.DeviceView{Classes: []*resourcev1.DeviceClass{other, gpuClass()}, Slices: []*resourcev1.ResourceSlice{gpuSlice("eu-0", 2, "40Gi"), gpuSlice("eu-1", 2, "80Gi")},
		Allocated: sets.New(structured.MakeDeviceID(gpuDriver, "eu-0", "gpu-0"))}
	got := placement.CountDevices(t.Context(), dv)
	want := []placement.DeviceClassCount{{Class: gpuDriver, Total: 4, Free: 3}, {Class: "nic.example.com"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("counts %+v, want %+v", got, want)
	}
}

// A pod's device claims count against a quota per class, under the name Kubernetes' ResourceQuota
// uses: an exact count as it is, a list of alternatives by its largest.
func TestDevicesCountAgainstQuotasPerClass(t *testing.T) {
	pod := placementtest.Elected()
	c := placement.DelegateConstraints(pod)
	c.Devices = map[string]resourcev1.ResourceClaimSpec{
		"train": {Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com", Count: 4, AllocationMode: resourcev1.DeviceAllocationModeExactCount}}}}},
		"nic": {Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "nic", FirstAvailable: []resourcev1.DeviceSubRequest{
			{Name: "fast", DeviceClassName: "nic.example.com", Count: 2, AllocationMode: resourcev1.DeviceAllocationModeExactCount},
			{Name: "slow", DeviceClassName: "nic.example.com", Count: 1, AllocationMode: resourcev1.DeviceAllocationModeExactCount}}}}}},
	}
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations[flotillav1.AnnotationDelegateConstraints] = string(raw)
	got := placement.QuotaRequests(pod)
	for name, want := range map[string]int64{"gpu.example.com.deviceclass.resource.k8s.io/devices": 4, "nic.example.com.deviceclass.resource.k8s.io/devices": 2} {
		if q := got[corev1.ResourceName(name)]; q.Value() != want {
			t.Errorf("%s = %s, want %d (all %v)", name, q.String(), want, got)
		}
	}
}
