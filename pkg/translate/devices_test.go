package translate

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// A proxy carries no DRA claim (the primary has no devices to allocate); its delegate gets every
// one back, on the containers that used them, and its copies name the templates and claims.
func TestResourceClaimsLeaveTheProxyAndComeBackOnTheDelegate(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", Annotations: map[string]string{}},
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}, {Name: "shared", ResourceClaimName: ptr.To("nic")}},
			InitContainers: []corev1.Container{{Name: "warm", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
			Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}, {Name: "shared"}}}},
				{Name: "side"}},
		}}
	want := pod.Spec.DeepCopy()
	var c Constraints
	TakeResourceClaims(&pod.Spec, &c)
	if pod.Spec.ResourceClaims != nil || pod.Spec.Containers[0].Resources.Claims != nil || pod.Spec.InitContainers[0].Resources.Claims != nil {
		t.Fatalf("the proxy keeps claims: %+v", pod.Spec)
	}
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations[flotillav1.AnnotationDelegateConstraints] = string(raw)
	d, err := Delegate(pod, "p1", Owner("p1", "u"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.Spec.ResourceClaims, want.ResourceClaims) || !reflect.DeepEqual(d.Spec.Containers[0].Resources.Claims, want.Containers[0].Resources.Claims) ||
		!reflect.DeepEqual(d.Spec.InitContainers[0].Resources.Claims, want.InitContainers[0].Resources.Claims) || d.Spec.Containers[1].Resources.Claims != nil {
		t.Errorf("delegate claims %+v, containers %+v %+v, want %+v", d.Spec.ResourceClaims, d.Spec.InitContainers, d.Spec.Containers, want)
	}
	if got := claimTemplatesOf(pod); !reflect.DeepEqual(got, []Ref{{Name: "one-gpu"}}) {
		t.Errorf("templates %+v", got)
	}
	if got := namedClaimsOf(pod); !reflect.DeepEqual(got, []Ref{{Name: "nic"}}) {
		t.Errorf("claims %+v", got)
	}
}
