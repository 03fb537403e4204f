package copies

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// pod references ConfigMaps (env) and Secrets (envFrom, optional or not) and runs as sa.
func pod(sa string, cms, secrets map[string]bool) *corev1.Pod {
	c := corev1.Container{Name: "c"}
	for name, optional := range cms {
		c.Env = append(c.Env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k", Optional: &optional}}})
	}
	for name, optional := range secrets {
		c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Optional: &optional}})
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{c}}}
}

func TestEnsure(t *testing.T) {
	primary := fake.NewClientBuilder().WithObjects(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "conf"}, Data: map[string]string{"k": "v"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"}, Type: corev1.SecretTypeOpaque},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "token"}, Type: corev1.SecretTypeServiceAccountToken},
	).Build()
	theirs := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "theirs"}}
	ours := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "ours", Labels: map[string]string{flotillav1.LabelPrimary: "p"}}}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		optIn   bool
		applied []string
		copied  translate.Copied
		err     error
	}{{
		name:    "what exists is applied, an optional missing one skipped, the ServiceAccount created",
		pod:     pod("web", map[string]bool{"conf": false, "gone": true}, map[string]bool{"db": false}),
		applied: []string{"ConfigMap conf", "Secret db"},
		copied:  translate.Copied{ConfigMaps: map[string]bool{"conf": true}, Secrets: map[string]bool{"db": true}},
	}, {
		name: "a required missing one stops the delegate",
		pod:  pod("", map[string]bool{"gone": false}, nil),
		err:  &Missing{Kind: "ConfigMap", Name: "gone"},
	}, {
		name: "a required ServiceAccount token is never copied",
		pod:  pod("", nil, map[string]bool{"token": false}),
		err:  &Missing{Kind: "Secret", Name: "token", Why: "a ServiceAccount token of the primary, which Flotilla never copies to a secondary"},
	}, {
		name:   "an optional one is dropped",
		pod:    pod("", nil, map[string]bool{"token": true}),
		copied: translate.Copied{ConfigMaps: map[string]bool{}, Secrets: map[string]bool{}},
	}, {
		name: "a ServiceAccount of the secondary's own is refused",
		pod:  pod("theirs", nil, nil),
		err:  &ForeignServiceAccount{Namespace: "shop", Name: "theirs"},
	}, {
		name:   "unless the namespace opts in",
		pod:    pod("theirs", nil, nil),
		optIn:  true,
		copied: translate.Copied{ConfigMaps: map[string]bool{}, Secrets: map[string]bool{}},
	}, {
		name:   "this primary's copy is its own",
		pod:    pod("ours", nil, nil),
		copied: translate.Copied{ConfigMaps: map[string]bool{}, Secrets: map[string]bool{}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
			if tc.optIn {
				ns.Labels = map[string]string{flotillav1.LabelAllowExistingServiceAccounts: "true"}
			}
			var applied []string
			sec := fake.NewClientBuilder().WithObjects(ns, theirs.DeepCopy(), ours.DeepCopy()).WithInterceptorFuncs(interceptor.Funcs{
				Patch: func(_ context.Context, _ client.WithWatch, obj client.Object, patch client.Patch, _ ...client.PatchOption) error {
					if patch.Type() != types.ApplyPatchType || obj.GetLabels()[flotillav1.LabelPrimary] != "p" {
						return fmt.Errorf("unexpected %s patch of %+v", patch.Type(), obj)
					}
					applied = append(applied, fmt.Sprintf("%s %s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName()))
					return nil
				}}).Build()
			r := &Reflector{Primary: primary, PrimaryID: "p"}
			copied, err := r.Ensure(t.Context(), sec, tc.pod, translate.Owner("p", "uid"))
			if tc.err != nil {
				if err == nil || reflect.TypeOf(err) != reflect.TypeOf(tc.err) || err.Error() != tc.err.Error() {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(applied, tc.applied) || !reflect.DeepEqual(copied, tc.copied) {
				t.Errorf("applied %v, copied %+v; want %v, %+v", applied, copied, tc.applied, tc.copied)
			}
			if name := tc.pod.Spec.ServiceAccountName; name != "" {
				var sa corev1.ServiceAccount
				if err := sec.Get(t.Context(), client.ObjectKey{Namespace: "shop", Name: name}, &sa); err != nil {
					t.Fatalf("ServiceAccount %s: %v", name, err)
				}
			}
		})
	}
}

// Missing and ForeignServiceAccount are told apart with errors.As.
func TestErrorsAreTyped(t *testing.T) {
	var missing *Missing
	var foreign *ForeignServiceAccount
	if !errors.As(fmt.Errorf("wrapped: %w", &Missing{Kind: "Secret", Name: "db"}), &missing) ||
		!errors.As(fmt.Errorf("wrapped: %w", &ForeignServiceAccount{Namespace: "shop", Name: "x"}), &foreign) {
		t.Fatal("not found by errors.As")
	}
}

// Ensure creates the kinds made from a reference's name alone with the ServiceAccount's rule (an
// existing one must be this primary's or opted in): no other kind may be made that way.
func TestOnlyTheServiceAccountIsMadeFromItsName(t *testing.T) {
	for _, k := range translate.DependencyKinds {
		if k.Read == translate.ReadNothing && k.Kind != translate.KindServiceAccount {
			t.Errorf("%s is made from its name alone, under the ServiceAccount's rule", k.Kind)
		}
	}
}
