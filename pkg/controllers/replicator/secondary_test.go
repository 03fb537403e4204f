package replicator

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/replication"
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
	in := replication.Inputs{Replicator: rep, PrimaryID: "p1"}
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
	in := replication.Inputs{Replicator: sample(), PrimaryID: "p1"}
	var notAllowed *NamespaceNotAllowedError
	if err := r.gate(t.Context(), &in); !errors.As(err, &notAllowed) {
		t.Fatalf("gate = %v, want NamespaceNotAllowedError", err)
	}
	r = &Reconciler{Live: fakeCluster(t)}
	if err := r.gate(t.Context(), &in); err != nil {
		t.Fatalf("a missing namespace is the Replicator's to create: %v", err)
	}
}

func workload(kind string, path []string, sa string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetKind(kind)
	if sa != "" {
		_ = unstructured.SetNestedField(u.Object, sa, append(path, "serviceAccountName")...)
	}
	return u
}

func TestServiceAccountOf(t *testing.T) {
	pod := []string{"spec", "template", "spec"}
	cases := []struct {
		name string
		obj  *unstructured.Unstructured
		want string
	}{
		{"Deployment", workload("Deployment", pod, "builder"), "builder"},
		{"StatefulSet", workload("StatefulSet", pod, "db"), "db"},
		{"DaemonSet", workload("DaemonSet", pod, "node-agent"), "node-agent"},
		{"Job", workload("Job", pod, "batch"), "batch"},
		{"CronJob", workload("CronJob", []string{"spec", "jobTemplate", "spec", "template", "spec"}, "cron"), "cron"},
		{"none named", workload("Deployment", pod, ""), ""},
		{"a ConfigMap has no pods", workload("ConfigMap", pod, "x"), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ServiceAccountOf(tc.obj); got != tc.want {
				t.Errorf("ServiceAccountOf = %q, want %q", got, tc.want)
			}
		})
	}
	deprecated := workload("Deployment", pod, "")
	_ = unstructured.SetNestedField(deprecated.Object, "old", "spec", "template", "spec", "serviceAccount")
	if got := ServiceAccountOf(deprecated); got != "old" {
		t.Errorf("the deprecated serviceAccount field: %q", got)
	}
}

func TestServiceAccountProblem(t *testing.T) {
	sa := func(labels map[string]string) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "builder", Labels: labels}}
	}
	cases := []struct {
		name      string
		sa        string
		live      *corev1.ServiceAccount
		carried   bool
		nsAllows  bool
		wantEmpty bool
	}{
		{"none named: the namespace's default", "", nil, false, false, true},
		{"the default one", "default", sa(nil), false, false, true},
		{"the secondary's own is refused", "builder", sa(nil), false, false, false},
		{"even when the Replicator carries one of that name (it is not applied over it)", "builder", sa(nil), true, false, false},
		{"another primary's copy is not this one's", "builder", sa(map[string]string{flotillav1.LabelPrimary: "p2"}), false, false, false},
		{"Flotilla's (this primary's) is used", "builder", sa(map[string]string{flotillav1.LabelPrimary: "p1"}), false, false, true},
		{"missing and carried: applied in this pass as Flotilla's", "builder", nil, true, false, true},
		{"missing and not carried: whoever makes it later would own the pods", "builder", nil, false, false, false},
		{"the namespace opts in", "builder", sa(nil), false, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ServiceAccountProblem(tc.sa, tc.live, tc.carried, tc.nsAllows, "p1")
			if (got == "") != tc.wantEmpty {
				t.Errorf("ServiceAccountProblem = %q, want empty %v", got, tc.wantEmpty)
			}
			if got != "" && !strings.Contains(got, flotillav1.LabelAllowExistingServiceAccounts) {
				t.Errorf("the message does not say how to opt in: %q", got)
			}
		})
	}
}

// In a secondary, a Deployment whose pods would run as that cluster's own ServiceAccount is not
// applied (reported, nothing written); with Flotilla's ServiceAccount of that name it is.
func TestApplyInASecondaryRefusesItsOwnServiceAccount(t *testing.T) {
	for _, tc := range []struct {
		name    string
		saLabel map[string]string
		applied bool
	}{
		{"the secondary's own", nil, false},
		{"Flotilla's", map[string]string{flotillav1.LabelPrimary: "p1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := sample()
			rep.Spec.DeploymentSpec.Template.Spec.ServiceAccountName = "builder"
			in := replication.Inputs{Replicator: rep, PrimaryID: "p1"}
			secondary := fakeCluster(t,
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{
					flotillav1.LabelManagedBy: "p1", flotillav1.LabelPrimary: "p1"}}},
				&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "builder", Labels: tc.saLabel}})
			r := &Reconciler{}
			pr := r.applyPlace(t.Context(), in, "s1", false, secondary, secondary)
			var got *flotillav1.AppliedResource
			for i := range pr.applied {
				if pr.applied[i].Kind == "Deployment" {
					got = &pr.applied[i]
				}
			}
			if got == nil {
				t.Fatalf("no Deployment in %+v", pr.applied)
			}
			err := secondary.Get(t.Context(), client.ObjectKey{Namespace: "shop", Name: "nginx"}, &appsv1.Deployment{})
			if tc.applied {
				if got.ApplyStatus != flotillav1.ApplyStatusOK || err != nil {
					t.Errorf("with Flotilla's ServiceAccount: %+v, read %v", got, err)
				}
				return
			}
			if got.ApplyStatus != flotillav1.ApplyStatusFailed || !strings.Contains(got.Message, "ServiceAccount shop/builder") || pr.sync.Synced {
				t.Errorf("with the secondary's own ServiceAccount: %+v (synced %v)", got, pr.sync.Synced)
			}
			if !apierrors.IsNotFound(err) {
				t.Errorf("the Deployment was written: %v", err)
			}
		})
	}
}
