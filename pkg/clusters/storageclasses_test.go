package clusters

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Each cluster's storage class setting lives with the registration, as "name=class" pairs.
func TestStorageClassesRoundTrip(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		AnnotationStorageClasses: " eu=fast-ssd, us=none ,broken, =x",
	}}}
	got := StorageClasses(secret)
	if len(got) != 2 || got["eu"] != "fast-ssd" || got["us"] != StorageClassNone {
		t.Fatalf("StorageClasses = %v", got)
	}
	setNamedValues(secret, AnnotationStorageClasses, map[string]string{"us": "none", "asia": "local-path"})
	if v := secret.Annotations[AnnotationStorageClasses]; v != "asia=local-path,us=none" {
		t.Errorf("annotation = %q, want the pairs sorted", v)
	}
	setNamedValues(secret, AnnotationStorageClasses, nil)
	if _, ok := secret.Annotations[AnnotationStorageClasses]; ok {
		t.Error("no setting left: the annotation goes")
	}
}
