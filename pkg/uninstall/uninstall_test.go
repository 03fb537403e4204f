package uninstall

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/internal/dryrun"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(flotillav1.AddToScheme(s))
	return s
}

func installed(extra ...client.Object) []client.Object {
	return append([]client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: flotillav1.WebhookConfigurationName}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "flotilla-system", Name: flotillav1.ManagerDeploymentName}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-eu", Labels: map[string]string{flotillav1.LabelNodeType: flotillav1.NodeTypeVirtualKubelet, flotillav1.LabelCluster: "eu"}}},
		// Another project's virtual-kubelet node and a real node: not Flotilla's.
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk-aci", Labels: map[string]string{flotillav1.LabelNodeType: flotillav1.NodeTypeVirtualKubelet, flotillav1.LabelCluster: "x"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}},
		&flotillav1.ClusterDetector{ObjectMeta: metav1.ObjectMeta{Namespace: "flotilla-system", Name: "eu"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "flotilla-system", Name: flotillav1.WebhookCASecretName}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "flotilla-system", Name: flotillav1.KubeconfigSecretName}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "flotilla-system", Name: "users-own"}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "flotilla-system", Name: flotillav1.ManagerLeaseName}},
	}, extra...)
}

func proxy(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name,
		Labels: map[string]string{flotillav1.LabelProxy: "true"}, Finalizers: []string{flotillav1.FinalizerDelegate}}}
}

func exists(t *testing.T, c client.Client, obj client.Object) bool {
	t.Helper()
	err := c.Get(t.Context(), client.ObjectKeyFromObject(obj), obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func TestRunRefusesAndChangesNothingWhileElectedPodsOrReplicatorsExist(t *testing.T) {
	rep := &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Namespace: "plumber", Name: "sample", Finalizers: []string{flotillav1.FinalizerReplicator}}}
	c := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(installed(proxy("web-1"), rep)...).Build()
	err := Run(t.Context(), c, Options{Timeout: time.Second})
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "demo/web-1") || !strings.Contains(err.Error(), "plumber/sample") {
		t.Fatalf("want ErrInUse naming demo/web-1 and plumber/sample, got %v", err)
	}
	var d appsv1.Deployment
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "flotilla-system", Name: flotillav1.ManagerDeploymentName}, &d); err != nil || *d.Spec.Replicas != 2 {
		t.Fatalf("the Deployment was changed: %v %v", err, d.Spec.Replicas)
	}
	if !exists(t, c, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: flotillav1.WebhookConfigurationName}}) {
		t.Fatal("the webhook configuration was deleted")
	}
}

func TestRunOrphansAndRemovesOnlyFlotillasObjects(t *testing.T) {
	p := proxy("web-1")
	c := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(installed(p)...).Build()
	var out bytes.Buffer
	if err := Run(t.Context(), c, Options{Orphan: true, Timeout: time.Second, Out: &out}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	gone := []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: flotillav1.WebhookConfigurationName}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-eu"}},
		&flotillav1.ClusterDetector{ObjectMeta: metav1.ObjectMeta{Namespace: "flotilla-system", Name: "eu"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "flotilla-system", Name: flotillav1.WebhookCASecretName}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "flotilla-system", Name: flotillav1.KubeconfigSecretName}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "flotilla-system", Name: flotillav1.ManagerLeaseName}},
	}
	for _, o := range gone {
		if exists(t, c, o) {
			t.Errorf("%T %s still exists", o, o.GetName())
		}
	}
	kept := []client.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk-aci"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "flotilla-system", Name: "users-own"}},
	}
	for _, o := range kept {
		if !exists(t, c, o) {
			t.Errorf("%T %s was deleted", o, o.GetName())
		}
	}
	var got corev1.Pod
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(p), &got); err != nil || len(got.Finalizers) != 0 {
		t.Errorf("the orphaned proxy keeps finalizers %v (%v)", got.Finalizers, err)
	}
	var d appsv1.Deployment
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "flotilla-system", Name: flotillav1.ManagerDeploymentName}, &d); err != nil || *d.Spec.Replicas != 0 {
		t.Errorf("the manager was not scaled to zero: %v %v", err, d.Spec.Replicas)
	}
}

func TestRunWaitsForTheManagerToLetGoOfItsLease(t *testing.T) {
	now := metav1.NewMicroTime(time.Now())
	held := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "flotilla-system", Name: flotillav1.ManagerLeaseName},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("laptop_1234"), RenewTime: &now, LeaseDurationSeconds: ptr.To[int32](60)}}
	objs := installed()
	objs[len(objs)-1] = held
	c := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(objs...).Build()
	err := Run(t.Context(), c, Options{Timeout: 1500 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "laptop_1234") {
		t.Fatalf("want a refusal naming the holder, got %v", err)
	}
	if !exists(t, c, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: flotillav1.WebhookConfigurationName}}) {
		t.Fatal("the webhook configuration was deleted while a manager ran (it would recreate it)")
	}
}

func TestHeld(t *testing.T) {
	now := time.Unix(10000, 0)
	renewed := func(ago time.Duration) *metav1.MicroTime { m := metav1.NewMicroTime(now.Add(-ago)); return &m }
	for name, tc := range map[string]struct {
		spec coordinationv1.LeaseSpec
		want bool
	}{
		"released":        {spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(""), RenewTime: renewed(time.Second)}},
		"never renewed":   {spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a")}},
		"fresh":           {spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), RenewTime: renewed(5 * time.Second)}, want: true},
		"lapsed":          {spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), RenewTime: renewed(20 * time.Second)}},
		"longer duration": {spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), RenewTime: renewed(20 * time.Second), LeaseDurationSeconds: ptr.To[int32](30)}, want: true},
	} {
		if got := Held(&coordinationv1.Lease{Spec: tc.spec}, now); got != tc.want {
			t.Errorf("%s: Held = %v, want %v", name, got, tc.want)
		}
	}
}

// A claim of class flotilla holds its data in a secondary, deleted only through Flotilla: the
// uninstall refuses while one exists, and with Orphan lets it go with its data kept.
func TestRunRefusesWhileClaimsHoldData(t *testing.T) {
	held := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "data-db-0", Finalizers: []string{flotillav1.FinalizerVolume}}}
	local := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "local"}}
	c := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(installed(held, local)...).Build()
	err := Run(t.Context(), c, Options{Timeout: time.Second})
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "1 claim(s) of class flotilla: db/data-db-0") {
		t.Fatalf("want ErrInUse naming db/data-db-0 only, got %v", err)
	}
	var out bytes.Buffer
	if err := Run(t.Context(), c, Options{Orphan: true, Timeout: time.Second, Out: &out}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var got corev1.PersistentVolumeClaim
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(held), &got); err != nil || len(got.Finalizers) != 0 {
		t.Errorf("the orphaned claim keeps finalizers %v (%v)", got.Finalizers, err)
	}
	if !strings.Contains(out.String(), "orphaned 1 claim(s) of class flotilla") {
		t.Errorf("output does not say so:\n%s", out.String())
	}
}

// --dry-run=server is refused before anything is read: the removal plans from what it reads.
func TestServerDryRunIsRefused(t *testing.T) {
	err := Run(t.Context(), nil, Options{DryRun: dryrun.Server, Out: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "use --dry-run=client") {
		t.Fatalf("error %v, want the refusal naming client", err)
	}
}

// With the chart's fullnameOverride, the names are read from the manager's Deployment: the
// objects of that prefix go, those of the default names (another product's, here) stay.
func TestRunFindsTheNamesOnTheManagersDeployment(t *testing.T) {
	names := flotillav1.NamesFrom("fleet")
	ns := flotillav1.SystemNamespace
	deployment := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.ManagerDeployment,
		Labels:      map[string]string{"app.kubernetes.io/name": "flotilla"},
		Annotations: map[string]string{flotillav1.AnnotationNamePrefix: "fleet"}}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)}}
	gone := []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: names.WebhookConfiguration}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.WebhookCASecret}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.SealSecret}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.CAConfigMap}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.ManagerLease}},
	}
	kept := []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: flotillav1.WebhookConfigurationName}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: flotillav1.WebhookCASecretName}},
	}
	c := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(append(append([]client.Object{deployment}, gone...), kept...)...).Build()
	var out bytes.Buffer
	if err := Run(t.Context(), c, Options{Timeout: time.Second, Out: &out}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, o := range gone {
		if exists(t, c, o) {
			t.Errorf("%T %s still exists\n%s", o, o.GetName(), out.String())
		}
	}
	for _, o := range kept {
		if !exists(t, c, o) {
			t.Errorf("%T %s, not of this prefix, was deleted", o, o.GetName())
		}
	}
	var d appsv1.Deployment
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(deployment), &d); err != nil || *d.Spec.Replicas != 0 {
		t.Errorf("Deployment %s was not scaled to zero: %v", names.ManagerDeployment, err)
	}
}

// A dry run names, from the primary as it is, each object the uninstall would stop, release or
// delete, changes nothing, and fails with the refusal the uninstall would give; -o json and -o
// yaml print the same document.
func TestDryRunPrintsThePlanAndChangesNothing(t *testing.T) {
	p := proxy("web-1")
	c := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(installed(p)...).Build()
	var out bytes.Buffer
	err := Run(t.Context(), c, Options{DryRun: dryrun.Client, Timeout: time.Second, Out: &out})
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("err = %v, want the refusal the uninstall gives", err)
	}
	for _, want := range []string{"scale Deployment flotilla-system/flotilla-manager to zero", "delete MutatingWebhookConfiguration flotilla",
		"delete virtual nodes: flotilla-eu\n", "delete ClusterDetectors: eu\n", "delete Secrets: flotilla-system/flotilla-webhook-ca, flotilla-system/kubeconfig\n",
		"delete Lease flotilla-system/flotilla-manager.flotilla.dev", "refuses, changing nothing: flotilla is still in use: 1 elected pod(s): demo/web-1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the plan lacks %q:\n%s", want, out.String())
		}
	}
	documents := map[string]Plan{}
	for _, format := range []string{"json", "yaml"} {
		var doc bytes.Buffer
		if err := Run(t.Context(), c, Options{DryRun: dryrun.Client, Orphan: true, Output: format, Timeout: time.Second, Out: &doc}); err != nil {
			t.Fatalf("-o %s: %v\n%s", format, err, doc.String())
		}
		var plan Plan
		if err := yaml.UnmarshalStrict(doc.Bytes(), &plan); err != nil {
			t.Fatalf("-o %s does not parse: %v\n%s", format, err, doc.String())
		}
		documents[format] = plan
	}
	plan := documents["json"]
	if !reflect.DeepEqual(plan, documents["yaml"]) {
		t.Errorf("json and yaml differ:\n%+v\n%+v", plan, documents["yaml"])
	}
	if plan.Kind != "UninstallPlan" || plan.Refusal != "" || !reflect.DeepEqual(plan.Orphaned.Proxies, []string{"demo/web-1"}) ||
		!reflect.DeepEqual(plan.VirtualNodes, []string{"flotilla-eu"}) || plan.Certificate != "" || !reflect.DeepEqual(plan.ConfigMaps, []string{}) {
		t.Errorf("plan = %+v", plan)
	}
	for _, o := range installed(p) {
		if !exists(t, c, o) {
			t.Errorf("the dry run deleted %T %s", o, o.GetName())
		}
	}
	var d appsv1.Deployment
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "flotilla-system", Name: flotillav1.ManagerDeploymentName}, &d); err != nil || *d.Spec.Replicas != 2 {
		t.Errorf("the dry run scaled the manager: %v", err)
	}
	if err := Run(t.Context(), c, Options{Output: "json", Out: io.Discard}); err == nil || !strings.Contains(err.Error(), "applies to --dry-run") {
		t.Errorf("-o without --dry-run: err = %v", err)
	}
}
