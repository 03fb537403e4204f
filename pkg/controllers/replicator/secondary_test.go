package replicator

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func fakeCluster(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

func TestGateRefusesAnExistingNamespaceThatDoesNotOptIn(t *testing.T) {
	r := &Reconciler{Live: fakeCluster(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}})}
	in := Inputs{Replicator: sample(), PrimaryID: "p1"}
	var notAllowed *NamespaceNotAllowedError
	if err := r.gate(t.Context(), &in); !errors.As(err, &notAllowed) {
		t.Fatalf("gate = %v, want NamespaceNotAllowedError", err)
	}
	r = &Reconciler{Live: fakeCluster(t)}
	if err := r.gate(t.Context(), &in); err != nil {
		t.Fatalf("a missing namespace is the Replicator's to create: %v", err)
	}
}
