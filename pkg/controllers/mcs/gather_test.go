package mcs

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// A secondary's Services and EndpointSlices are all cached: those not Flotilla's keep only what
// an export reads; Flotilla's stay whole (the apply ledger compares them).
func TestSlimKeepsWhatAnExportReads(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop",
		Annotations:   map[string]string{corev1.LastAppliedConfigAnnotation: "{...}"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1", Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}, SessionAffinity: corev1.ServiceAffinityClientIP}}
	out, err := slimService(svc)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*corev1.Service)
	if s.Annotations != nil || s.ManagedFields != nil || s.Spec.Selector != nil {
		t.Errorf("kept what no export reads: %+v", s.ObjectMeta)
	}
	if s.Spec.ClusterIP != "10.96.0.1" || len(s.Spec.Ports) != 1 || s.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
		t.Errorf("lost what an export reads: %+v", s.Spec)
	}
	ours := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-mcs-web", Labels: map[string]string{flotillav1.LabelPrimary: "p"},
		Annotations: map[string]string{"a": "b"}}}
	if out, _ := slimService(ours); out.(*corev1.Service).Annotations["a"] != "b" {
		t.Error("Flotilla's derived Service lost its annotations")
	}

	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-x", Labels: map[string]string{discoveryv1.LabelServiceName: "web"},
		Annotations: map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "t"}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.5"}, Hostname: ptr.To("web-0"), Zone: ptr.To("a"),
			NodeName: ptr.To("node-1"), TargetRef: &corev1.ObjectReference{Name: "web-0"}}}}
	out, err = slimSlice(slice)
	if err != nil {
		t.Fatal(err)
	}
	e := out.(*discoveryv1.EndpointSlice).Endpoints[0]
	if e.NodeName != nil || e.TargetRef != nil || out.(*discoveryv1.EndpointSlice).Annotations != nil {
		t.Errorf("kept another cluster's pod and node names: %+v", e)
	}
	if e.Addresses[0] != "10.0.0.5" || *e.Hostname != "web-0" || *e.Zone != "a" {
		t.Errorf("lost what an import mirrors: %+v", e)
	}
}

// Applies are paced: one that the limiter does not allow waits, and gives up with its context.
func TestApplyWaitsForThePace(t *testing.T) {
	r := &Reconciler{Applies: rate.NewLimiter(rate.Limit(0.001), 1), Clock: clocktesting.NewFakePassiveClock(time.Now())}
	r.Applies.Allow() // the one token is taken
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	v := &clusterView{name: "s1"} // no client: an apply that did not wait would panic
	_, err := r.apply(ctx, v, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flotilla-mcs-web"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "waiting for the pace") {
		t.Fatalf("apply did not wait for the pace: %v", err)
	}
}

// A Service or EndpointSlice wakes a reconcile only for a name seen exported, or when Flotilla
// wrote it: a secondary's thousands of Services that nobody exports cost no reconcile.
func TestOnlyExportedNamesWakeAReconcile(t *testing.T) {
	r := &Reconciler{}
	r.names.Store(client.ObjectKey{Namespace: "shop", Name: "web"}, true)
	svc := func(name string, labels map[string]string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: labels}}
	}
	if got := r.exportedNameOf(t.Context(), svc("web", nil)); len(got) != 1 {
		t.Errorf("an exported name's Service: %v", got)
	}
	if got := r.exportedNameOf(t.Context(), svc("db", nil)); len(got) != 0 {
		t.Errorf("a Service nobody exports woke %v", got)
	}
	derived := svc("flotilla-mcs-db", map[string]string{flotillav1.LabelPrimary: "p", "multicluster.kubernetes.io/service-name": "db"})
	if got := r.exportedNameOf(t.Context(), derived); len(got) != 1 || got[0].Name != "db" {
		t.Errorf("Flotilla's own Service: %v", got)
	}
}

// A manager that has just started knows no secondary until the registration Secret is applied:
// a reconcile then waits and writes nothing, so the import keeps the silent secondaries it lists
// (the primary's import was rewritten without them when the reconcile ran first).
func TestReconcileWaitsForTheRegistrationSecret(t *testing.T) {
	r := &Reconciler{Registry: clusters.NewRegistry(clusters.Options{PrimaryID: "p"}, logr.Discard())} // no client: a reconcile that read or wrote would panic
	got, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "shop", Name: "web"}})
	if err != nil || got.RequeueAfter != clusters.ConfiguredRecheck {
		t.Fatalf("Reconcile before the registration Secret = %+v, %v; want a wait of %s", got, err, clusters.ConfiguredRecheck)
	}
}
