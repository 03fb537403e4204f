package namespace

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestCreatedForDelegatesOnlyThisPrimarysOwnNamespaces(t *testing.T) {
	now := metav1.Now()
	made := map[string]string{flotillav1.LabelManagedBy: "p1", flotillav1.LabelPrimary: "p1"}
	for _, tc := range []struct {
		name string
		ns   corev1.Namespace
		want bool
	}{
		{"created for delegates", corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Labels: made}}, true},
		{"opened by an admin (managed-by only)", corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{flotillav1.LabelManagedBy: "p1"}}}, false},
		{"a Replicator's (it removes its own)", corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Labels: made,
			Annotations: map[string]string{flotillav1.AnnotationCreatedBy: "p1/uid"}}}, false},
		{"another primary's", corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{flotillav1.LabelManagedBy: "p2", flotillav1.LabelPrimary: "p2"}}}, false},
		{"already going", corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Labels: made, DeletionTimestamp: &now}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CreatedForDelegates(&tc.ns, "p1"); got != tc.want {
				t.Errorf("CreatedForDelegates = %t, want %t", got, tc.want)
			}
		})
	}
}
