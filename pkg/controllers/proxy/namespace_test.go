package proxy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// primaryOnly is a registry that knows only the primary's ID.
type primaryOnly struct{ Secondaries }

func (primaryOnly) PrimaryID() string { return "primary-id" }

// A namespace the cleanup deleted in a secondary is made again for the next delegate (once, a
// remembered key that the forgetting missed left every later proxy Pending); a Pod Security level
// changed in the primary is carried to a namespace already made.
func TestEnsureNamespaceAfterForgettingAndOnALevelChange(t *testing.T) {
	ctx := t.Context()
	c := fake.NewClientBuilder().WithObjects(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "default"}}).Build()
	r := &Reconciler{Secondaries: primaryOnly{}}
	sec := clusters.Secondary{Name: "east", Client: c}
	baseline := map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}
	ensure := func(labels map[string]string) {
		t.Helper()
		if reason, msg, err := r.ensureNamespace(ctx, "shop", labels, sec); reason != "" || err != nil {
			t.Fatalf("ensureNamespace: %s %s %v", reason, msg, err)
		}
	}
	ensure(baseline)
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: "shop"}, &ns); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, &ns); err != nil {
		t.Fatal(err)
	}
	r.forgetNamespace("east", "shop")
	ensure(baseline)
	if err := c.Get(ctx, client.ObjectKey{Name: "shop"}, &ns); err != nil {
		t.Fatalf("not made again after it was forgotten: %v", err)
	}
	ensure(map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	if err := c.Get(ctx, client.ObjectKey{Name: "shop"}, &ns); err != nil || ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Fatalf("the tightened level is not carried: %v %v", ns.Labels, err)
	}
}
