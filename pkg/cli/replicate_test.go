package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// shop is a namespace as users have it: a Deployment and its ReplicaSet, a Service with its
// cluster IP, a ConfigMap, a Secret, another Replicator's ConfigMap, and what Kubernetes adds.
func shop() []client.Object {
	one := int32(1)
	sel := map[string]string{"app": "web"}
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		&flotillav1.ClusterDetector{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: "secondary1"},
			Spec: flotillav1.ClusterDetectorSpec{Context: "kind-eu", Cluster: "eu", User: "admin"}},
		&flotillav1.ClusterDetector{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: "secondary2"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Annotations: map[string]string{
			"kubectl.kubernetes.io/last-applied-configuration": "{}", "deployment.kubernetes.io/revision": "3", "team": "a"}},
			Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web:1"}}}}},
			Status: appsv1.DeploymentStatus{ReadyReplicas: 1}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-abc", OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "web"}}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
			ClusterIP: "10.0.0.7", ClusterIPs: []string{"10.0.0.7"}, Selector: sel, Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080}}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "conf"}, Data: map[string]string{"a": "b"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "kube-root-ca.crt"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "theirs", Labels: map[string]string{flotillav1.LabelReplicator: "other"}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-password"}, Data: map[string][]byte{"p": []byte("s3cret")}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "default"}},
	}
}

func runReplicateCommand(t *testing.T, c client.Client, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newReplicateCommand(func() (client.Client, error) { return c, nil })
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

func TestReplicateDryRunPrintsTheReplicatorAndWritesNothing(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(shop()...).Build()
	out, errOut, err := runReplicateCommand(t, c, "shop", "--to", "secondary1,kind-eu", "--to", "eu.admin", "--dry-run=client", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rep flotillav1.Replicator
	if err := yaml.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Name != "shop" || rep.Spec.ReplicationNamespace != "shop" || strings.Join(rep.Spec.TargetCluster, ",") != "secondary1,kind-eu,eu.admin" ||
		rep.APIVersion != "flotilla.dev/v1alpha1" || rep.Kind != "Replicator" {
		t.Errorf("replicator %+v", rep)
	}
	var got []string
	for _, m := range rep.Spec.Resources {
		got = append(got, m.Kind+"/"+m.Metadata.Name)
	}
	if strings.Join(got, " ") != "ConfigMap/conf Service/web Deployment/web" {
		t.Errorf("resources %v: want the user's ConfigMap, Service and Deployment only", got)
	}
	for _, absent := range []string{"status", "10.0.0.7", "30080", "last-applied", "revision", "resourceVersion", "s3cret", "creationTimestamp"} {
		if strings.Contains(out, absent) {
			t.Errorf("the Replicator carries %q:\n%s", absent, out)
		}
	}
	for _, note := range []string{"Secret db-password: a Replicator's resources would hold its data in the clear", "ConfigMap theirs: already carried by Replicator other"} {
		if !strings.Contains(errOut, note) {
			t.Errorf("stderr lacks %q:\n%s", note, errOut)
		}
	}
	if err := c.Get(t.Context(), client.ObjectKey{Name: "shop"}, &flotillav1.Replicator{}); err == nil {
		t.Error("a dry run created the Replicator")
	}
	var ns corev1.Namespace
	if err := c.Get(t.Context(), client.ObjectKey{Name: "shop"}, &ns); err != nil || ns.Labels[flotillav1.LabelReplicationAllowed] != "" {
		t.Errorf("a dry run labelled the namespace: %v %v", ns.Labels, err)
	}
}

func TestReplicateCreatesThenExtends(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(shop()...).Build()
	// Without --adopt: refused, nothing changed.
	if _, _, err := runReplicateCommand(t, c, "shop", "--to", "secondary1"); err == nil || !strings.Contains(err.Error(), "--adopt") {
		t.Fatalf("without --adopt: %v, want a refusal naming --adopt", err)
	}
	var before appsv1.Deployment
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "shop", Name: "web"}, &before); err != nil || before.Labels[flotillav1.LabelReplicator] != "" {
		t.Fatalf("refused, yet adopted: %v %v", before.Labels, err)
	}
	out, errOut, err := runReplicateCommand(t, c, "shop", "--to", "secondary1", "--adopt")
	if err != nil || !strings.Contains(out, "replicator.flotilla.dev/shop created: 3 object(s) of shop added, targets secondary1") {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	var ns corev1.Namespace
	if err := c.Get(t.Context(), client.ObjectKey{Name: "shop"}, &ns); err != nil || ns.Labels[flotillav1.LabelReplicationAllowed] != "true" {
		t.Errorf("the namespace opts in: %v %v", ns.Labels, err)
	}
	var d appsv1.Deployment
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "shop", Name: "web"}, &d); err != nil || d.Labels[flotillav1.LabelReplicator] != "shop" {
		t.Errorf("the Deployment is the Replicator's: %v %v", d.Labels, err)
	}

	// A new object and a second cluster: both added, nothing doubled.
	if err := c.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "later"}}); err != nil {
		t.Fatal(err)
	}
	out, errOut, err = runReplicateCommand(t, c, "shop", "--to", "secondary2,secondary1", "--adopt")
	if err != nil || !strings.Contains(out, "configured: 1 object(s) of shop added, targets secondary1, secondary2") {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	var rep flotillav1.Replicator
	if err := c.Get(t.Context(), client.ObjectKey{Name: "shop"}, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Spec.Resources) != 4 {
		t.Errorf("resources %d, want 4", len(rep.Spec.Resources))
	}
}

func TestReplicateRefusesWithAClearError(t *testing.T) {
	other := &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: "shop"}, Spec: flotillav1.ReplicatorSpec{ReplicationNamespace: "elsewhere"}}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no cluster", []string{"shop"}, "--to is required"},
		{"a system namespace", []string{"kube-system", "--to", "secondary1"}, "cannot be replicated"},
		{"not a namespace name", []string{"Shop", "--to", "secondary1"}, `namespace "Shop"`},
		{"'*' with names", []string{"shop", "--to", "*,secondary1"}, "cannot be combined"},
		{"an unknown cluster", []string{"shop", "--to", "secondary1,atlantis"}, "unknown cluster(s) atlantis: flotillactl cluster list"},
		{"a missing namespace", []string{"nowhere", "--to", "secondary1"}, "namespace nowhere not found in the primary"},
		{"a Replicator of that name for another namespace", []string{"shop", "--to", "secondary1", "--dry-run"}, "replicates namespace elsewhere, not shop: choose another --name"},
		{"a dry run of no known kind", []string{"shop", "--to", "secondary1", "--dry-run=maybe"}, "want none, client or server"},
		{"two namespaces", []string{"shop", "cart", "--to", "secondary1"}, "one namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(append(shop(), other)...).Build()
			_, _, err := runReplicateCommand(t, c, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// The API server refuses the Replicator (its author lacks a right): nothing is labelled.
func TestReplicateLabelsNothingWhenTheReplicatorIsRefused(t *testing.T) {
	refuse := interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*flotillav1.Replicator); ok {
			return apierrors.NewForbidden(schema.GroupResource{Group: "flotilla.dev", Resource: "replicators"}, "shop", errors.New("user may not create deployments.apps"))
		}
		return c.Create(ctx, obj, opts...)
	}}
	c := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(shop()...).WithInterceptorFuncs(refuse).Build()
	_, _, err := runReplicateCommand(t, c, "shop", "--to", "secondary1", "--adopt")
	if err == nil || !strings.Contains(err.Error(), "may not create deployments.apps") {
		t.Fatalf("error %v, want the refusal", err)
	}
	var ns corev1.Namespace
	var d appsv1.Deployment
	if err := c.Get(t.Context(), client.ObjectKey{Name: "shop"}, &ns); err != nil || ns.Labels[flotillav1.LabelReplicationAllowed] != "" {
		t.Errorf("the namespace was labelled: %v %v", ns.Labels, err)
	}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "shop", Name: "web"}, &d); err != nil || d.Labels[flotillav1.LabelReplicator] != "" {
		t.Errorf("the Deployment was adopted: %v %v", d.Labels, err)
	}
}

// --dry-run=server has the API server check the Replicator as it would be written, and writes
// nothing: no Replicator kept, nothing labelled, nothing adopted.
func TestReplicateServerDryRunAsksTheAPIServerAndWritesNothing(t *testing.T) {
	var dryRuns, writes int
	count := interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		co := &client.CreateOptions{}
		co.ApplyOptions(opts)
		if _, ok := obj.(*flotillav1.Replicator); ok {
			if len(co.DryRun) > 0 {
				dryRuns++
				return nil // the fake keeps nothing of a dry run, as the API server
			}
			writes++
		}
		return c.Create(ctx, obj, opts...)
	}}
	c := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(shop()...).WithInterceptorFuncs(count).Build()
	out, _, err := runReplicateCommand(t, c, "shop", "--to", "secondary1", "--adopt", "--dry-run=server")
	if err != nil {
		t.Fatal(err)
	}
	if dryRuns != 1 || writes != 0 || !strings.Contains(out, "(server dry run)") {
		t.Errorf("dry runs %d, writes %d, output %q; want one dry run, no write, the output saying so", dryRuns, writes, out)
	}
	var ns corev1.Namespace
	if err := c.Get(t.Context(), client.ObjectKey{Name: "shop"}, &ns); err != nil || ns.Labels[flotillav1.LabelReplicationAllowed] != "" {
		t.Errorf("the namespace was labelled: %v %v", ns.Labels, err)
	}
}
