package replicator

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestNamespaceAllowed(t *testing.T) {
	const mine, primaryID = "p1/uid-1", "p1"
	ns := func(labels, annotations map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: labels, Annotations: annotations}}
	}
	flotillas := map[string]string{flotillav1.LabelManagedBy: primaryID, flotillav1.LabelPrimary: primaryID}
	cases := []struct {
		name    string
		ns      *corev1.Namespace
		primary bool
		want    bool
	}{
		{"a namespace that merely exists (argocd) is not written", ns(nil, nil), true, false},
		{"nor in a secondary", ns(nil, nil), false, false},
		{"one it created is", ns(nil, map[string]string{flotillav1.AnnotationCreatedBy: mine}), true, true},
		{"one another Replicator created is not", ns(nil, map[string]string{flotillav1.AnnotationCreatedBy: "p1/uid-2"}), true, false},
		{"one that opts in is", ns(map[string]string{flotillav1.LabelReplicationAllowed: "true"}, nil), true, true},
		{"a label other than true does not opt in", ns(map[string]string{flotillav1.LabelReplicationAllowed: "yes"}, nil), true, false},
		{"a secondary's namespace Flotilla created for this primary is (the primary's verdict governs)", ns(flotillas, nil), false, true},
		{"but in the primary those labels prove nothing", ns(flotillas, nil), true, false},
		{"a secondary's namespace an admin opened to this primary (managed-by only) must opt in",
			ns(map[string]string{flotillav1.LabelManagedBy: primaryID}, nil), false, false},
		{"and may", ns(map[string]string{flotillav1.LabelManagedBy: primaryID, flotillav1.LabelReplicationAllowed: "true"}, nil), false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := NamespaceAllowed(tc.ns, mine, primaryID, tc.primary); got != tc.want {
				t.Errorf("NamespaceAllowed = %v, want %v", got, tc.want)
			}
		})
	}
}
