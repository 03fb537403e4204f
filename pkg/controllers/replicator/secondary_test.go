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

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func fakeCluster(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

// The namespace a Replicator creates in a secondary enforces the primary namespace's Pod Security
// level: gate takes the labels from the primary, ensureNamespace puts them on the secondary's.
func TestSecondaryNamespaceCarriesThePrimarysPodSecurityLabels(t *testing.T) {
	rep := sample()
	psa := map[string]string{"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "latest"}
	labels := map[string]string{flotillav1.LabelReplicationAllowed: "true", "team": "shop"}
	for k, v := range psa {
		labels[k] = v
	}
	primary := fakeCluster(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: labels}})
	r := &Reconciler{Live: primary}
	in := Inputs{Replicator: rep, PrimaryID: "p1"}
	if err := r.gate(t.Context(), &in); err != nil {
		t.Fatal(err)
	}
	secondary := fakeCluster(t)
	if reason, err := r.ensureNamespace(t.Context(), in, "s1", false, secondary, secondary); err != nil {
		t.Fatalf("%s: %v", reason, err)
	}
	var ns corev1.Namespace
	if err := secondary.Get(t.Context(), client.ObjectKey{Name: "shop"}, &ns); err != nil {
		t.Fatal(err)
	}
	for k, v := range psa {
		if ns.Labels[k] != v {
			t.Errorf("secondary namespace label %s = %q, want %q (labels %v)", k, ns.Labels[k], v, ns.Labels)
		}
	}
	if ns.Labels["team"] != "" || ns.Labels[flotillav1.LabelReplicationAllowed] != "" {
		t.Errorf("only Pod Security labels are carried: %v", ns.Labels)
	}
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
