package translate

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func ephemeral(name, class string) corev1.Volume {
	v := corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
		VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{}}}}}
	if class != "" {
		v.Ephemeral.VolumeClaimTemplate.Spec.StorageClassName = ptr.To(class)
	}
	return v
}

// Claims of class flotilla follow the pod; ephemeral volumes of other classes stay refused.
func TestVolumesThatFollowAPod(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cache-0", Namespace: "ns", UID: "u"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-cache-0"}}},
		ephemeral("scratch", flotillav1.StorageClassRemote),
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}}}
	if got := VolumeClaims(pod); !slices.Equal(got, []string{"data-cache-0", "cache-0-scratch"}) {
		t.Errorf("VolumeClaims = %v", got)
	}
	if problems := NotOffloadable(&pod.Spec); len(problems) != 0 {
		t.Errorf("NotOffloadable = %v, want none", problems)
	}
	if !AtMostOnce(pod) {
		t.Error("a pod with a claim is at-most-once")
	}
	d, err := Delegate(pod, "p", Owner("p", "o"))
	if err != nil {
		t.Fatal(err)
	}
	var scratch *corev1.Volume
	for i := range d.Spec.Volumes {
		if d.Spec.Volumes[i].Name == "scratch" {
			scratch = &d.Spec.Volumes[i]
		}
	}
	if scratch == nil || scratch.Ephemeral != nil || scratch.PersistentVolumeClaim == nil || scratch.PersistentVolumeClaim.ClaimName != "cache-0-scratch" {
		t.Errorf("the delegate's scratch volume = %+v, want the claim cache-0-scratch Flotilla makes there", scratch)
	}

	for _, class := range []string{"", "standard"} {
		other := &corev1.PodSpec{Volumes: []corev1.Volume{ephemeral("scratch", class)}}
		if problems := NotOffloadable(other); len(problems) != 1 || !strings.Contains(problems[0], "ephemeral volume whose storage class is not flotilla") {
			t.Errorf("class %q: NotOffloadable = %v", class, problems)
		}
	}
}
