package setup

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/seal"
)

func TestEnsureMakesOneKeyAndKeepsIt(t *testing.T) {
	ctx := t.Context()
	c := fake.NewClientBuilder().Build()
	first, err := ensureSealKey(ctx, c, "seal")
	if err != nil || len(first) != seal.KeySize {
		t.Fatalf("Ensure = %d bytes, %v", len(first), err)
	}
	again, err := ensureSealKey(ctx, c, "seal")
	if err != nil || string(again) != string(first) {
		t.Fatalf("a second Ensure made another key (%v)", err)
	}
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: "seal"}, &s); err != nil {
		t.Fatal(err)
	}
	if s.Immutable == nil || !*s.Immutable {
		t.Fatal("the key's Secret is not immutable")
	}
	// A Secret without a usable key is an error that says what to do, not a weak key.
	s.Data = map[string][]byte{"key": []byte("short")}
	c = fake.NewClientBuilder().WithObjects(&s).Build()
	if _, err := ensureSealKey(ctx, c, "seal"); err == nil {
		t.Fatal("a short key was used")
	}
}
