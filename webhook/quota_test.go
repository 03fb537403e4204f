package webhook

import (
	"encoding/json"
	"slices"
	"testing"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/clusters/views"
)

// An elected pod of a namespace with a FleetQuota is made a proxy that waits behind the quota
// gate, annotated waiting; one of a namespace without is not gated.
func TestAPodOfANamespaceWithAQuotaWaitsBehindTheQuotaGate(t *testing.T) {
	scheme := clusters.NewScheme()
	fleet := registered{{Name: "east", Role: clusters.RoleSecondary, ID: "e", Status: flotillav1.ClusterRunning, CapacitySynced: true}}
	quotas := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&flotillav1.FleetQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "fleet"}}).Build()
	h := &Handler{Views: &views.Gatherer{Registry: fleet}, Decoder: admission.NewDecoder(scheme), Quotas: quotas,
		SealKey: []byte("0123456789abcdef0123456789abcdef")}
	for ns, gated := range map[string]bool{"team": true, "free": false} {
		pod := elected()
		pod.Namespace = ns
		raw, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		resp := h.Handle(t.Context(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: ns, Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw}}})
		if !resp.Allowed {
			t.Fatalf("%s: refused: %v", ns, resp.Result)
		}
		has := func(path string, value any) bool {
			return slices.ContainsFunc(resp.Patches, func(p jsonpatch.Operation) bool {
				return p.Path == path && (value == nil || p.Value == value)
			})
		}
		gate := slices.ContainsFunc(resp.Patches, func(p jsonpatch.Operation) bool {
			b, _ := json.Marshal(p.Value)
			return p.Path == "/spec/schedulingGates" && string(b) == `[{"name":"`+flotillav1.SchedulingGateQuota+`"}]`
		})
		waiting := has("/metadata/annotations/flotilla.dev~1quota", flotillav1.QuotaWaiting)
		if gate != gated || waiting != gated || (gated && has("/spec/nodeName", nil)) {
			t.Errorf("%s: quota gate %v, annotated waiting %v, patches %+v; want gated %v and never bound", ns, gate, waiting, resp.Patches, gated)
		}
	}
}
