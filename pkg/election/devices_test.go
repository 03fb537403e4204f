package election

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// An elected pod that claims devices is admitted to a cluster whose devices the allocator finds
// for it; the proxy keeps no claim, its constraints keep them all for the delegate.
func TestAPodThatClaimsDevicesGoesWhereTheyAre(t *testing.T) {
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}}
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "us-0"}, Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com",
		NodeName: ptr.To(twoClusters[1].Nodes[0].Name), Pool: resourcev1.ResourcePool{Name: "p", ResourceSliceCount: 1}, Devices: []resourcev1.Device{{Name: "gpu-0"}}}}
	clusters := []placement.ClusterView{twoClusters[0], twoClusters[1]}
	clusters[0].Devices = &placement.DeviceView{}
	clusters[1].Devices = &placement.DeviceView{Classes: []*resourcev1.DeviceClass{class}, Slices: []*resourcev1.ResourceSlice{slice}}
	pod := elected(func(p *corev1.Pod) {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	})
	spec := resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
		Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com", Count: 1, AllocationMode: resourcev1.DeviceAllocationModeExactCount}}}}}
	out, err := Mutate(t.Context(), pod, clusters, nil, Options{Choose: func([]int64) int { return 0 },
		Devices: placement.DeviceClaims{Specs: map[string]resourcev1.ResourceClaimSpec{"gpu": spec}}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Spec.NodeName != flotillav1.VirtualNodeName("us") {
		t.Errorf("bound to %q (why %q), want us's virtual node", out.Spec.NodeName, out.Annotations[flotillav1.AnnotationNoClusterFits])
	}
	if out.Spec.ResourceClaims != nil || out.Spec.Containers[0].Resources.Claims != nil {
		t.Errorf("the proxy keeps claims: %+v", out.Spec)
	}
	var c translate.Constraints
	if err := json.Unmarshal([]byte(out.Annotations[flotillav1.AnnotationDelegateConstraints]), &c); err != nil {
		t.Fatal(err)
	}
	if len(c.ResourceClaims) != 1 || len(c.ContainerClaims[pod.Spec.Containers[0].Name]) != 1 || len(c.Devices) != 1 {
		t.Errorf("constraints %+v lack the claims", c)
	}
}
