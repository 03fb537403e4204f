package translate

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// Each entry is whole for what its reads and uses need, names a real API, and its copy is of its
// own kind, marked as Flotilla's.
func TestDependencyKindsAreWhole(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range DependencyKinds {
		t.Run(k.Kind, func(t *testing.T) {
			if seen[k.Kind] {
				t.Fatal("listed twice")
			}
			seen[k.Kind] = true
			if got, ok := DependencyKindOf(k.Kind); !ok || got.Resource != k.Resource {
				t.Errorf("DependencyKindOf = %+v, %v", got, ok)
			}
			if plural, _ := meta.UnsafeGuessKindToResource(k.Resource.GroupVersion().WithKind(k.Kind)); plural != k.Resource {
				t.Errorf("resource %v, want %v", k.Resource, plural)
			}
			if k.New == nil || reflect.TypeOf(k.New()).Elem().Name() != k.Kind {
				t.Fatalf("New makes no %s", k.Kind)
			}
			if k.Read == ReadCache && (k.NewList == nil || reflect.TypeOf(k.NewList()).Elem().Name() != k.Kind+"List") {
				t.Errorf("a cached kind without NewList of %sList", k.Kind)
			}
			switch {
			case k.Use == UseReference && k.References == nil, k.Use == UseSelector && k.Selects == nil, k.Use == UseBackends && k.Backends == nil:
				t.Errorf("use %d without its function", k.Use)
			case k.Read == 0 || k.Use == 0:
				t.Errorf("read %d, use %d", k.Read, k.Use)
			}
			src := k.New()
			src.SetName("x")
			src.SetNamespace("ns")
			c := k.Copy(src, "p", Owner("p", "u"))
			if c == nil || reflect.TypeOf(c) != reflect.TypeOf(src) {
				t.Fatalf("Copy = %T, want %T", c, src)
			}
			if c.GetName() != "x" || c.GetNamespace() != "ns" || c.GetLabels()[flotillav1.LabelPrimary] != "p" ||
				c.GetAnnotations()[flotillav1.AnnotationOwner] != flotillav1.OwnerReflect || len(c.GetOwnerReferences()) != 1 {
				t.Errorf("copy metadata %+v", c)
			}
			if k.Copy(&metav1.PartialObjectMetadata{}, "p", Owner("p", "u")) != nil {
				t.Error("Copy of an object of another type")
			}
		})
	}
}

// Flotilla never reads a Secret in a secondary, never copies a ServiceAccount token, and a
// ServiceAccount copy is made from the name alone.
func TestDependencyKindsKeepTheSecretsRules(t *testing.T) {
	secret, _ := DependencyKindOf(KindSecret)
	if !secret.WriteOnly || secret.NotCopied == nil {
		t.Fatalf("Secret: %+v", secret)
	}
	if why := secret.NotCopied(&corev1.Secret{Type: corev1.SecretTypeServiceAccountToken}); why == "" {
		t.Error("a ServiceAccount token is copied")
	}
	if why := secret.NotCopied(&corev1.Secret{Type: corev1.SecretTypeOpaque}); why != "" {
		t.Errorf("an opaque Secret is not copied: %s", why)
	}
	sa, _ := DependencyKindOf(KindServiceAccount)
	if sa.Read != ReadNothing || sa.Synced() {
		t.Errorf("ServiceAccount: %+v", sa)
	}
	for _, tc := range []struct {
		name, runsAs string
		want         []Ref
	}{{"none", "", nil}, {"the namespace's default", "default", nil}, {"its own", "web", []Ref{{Name: "web"}}}} {
		got := sa.References(&corev1.Pod{Spec: corev1.PodSpec{ServiceAccountName: tc.runsAs}})
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: References = %v, want %v", tc.name, got, tc.want)
		}
	}
}
