package webhook

import (
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/clusters/views"
)

type noClusters struct{}

func (noClusters) Snapshots() []clusters.Snapshot { return nil }

func TestHandleCountsEachDecisionByOutcome(t *testing.T) {
	request := func(t *testing.T, pod *corev1.Pod) admission.Request {
		raw, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: "demo", Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw}}}
	}
	plain := elected()
	plain.Annotations = nil
	garbage := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Object: runtime.RawExtension{Raw: []byte("{not json")}}}
	for name, tc := range map[string]struct {
		sealKey []byte
		req     func(t *testing.T) admission.Request
		outcome string
		allowed bool
	}{
		"a pod that does not ask to be elected": {nil, func(t *testing.T) admission.Request { return request(t, plain) }, OutcomeSkipped, true},
		"a request that does not decode":        {nil, func(*testing.T) admission.Request { return garbage }, OutcomeError, false},
		"no seal key to sign the proxy with":    {nil, func(t *testing.T) admission.Request { return request(t, elected()) }, OutcomeError, false},
		"an unknown cluster asked for": {[]byte("0123456789abcdef0123456789abcdef"), func(t *testing.T) admission.Request {
			return request(t, elected(annotate(flotillav1.AnnotationClusters, "atlantis")))
		}, OutcomeDenied, false},
	} {
		t.Run(name, func(t *testing.T) {
			h := &Handler{Views: &views.Gatherer{Registry: noClusters{}}, Decoder: admission.NewDecoder(clientgoscheme.Scheme), SealKey: tc.sealKey}
			before := testutil.ToFloat64(decisions.WithLabelValues(tc.outcome, ""))
			resp := h.Handle(t.Context(), tc.req(t))
			if resp.Allowed != tc.allowed {
				t.Errorf("allowed %v, want %v (%v)", resp.Allowed, tc.allowed, resp.Result)
			}
			if got := testutil.ToFloat64(decisions.WithLabelValues(tc.outcome, "")) - before; got != 1 {
				t.Errorf("%s counted %v times, want once", tc.outcome, got)
			}
		})
	}
}

func TestAdmittedOutcomeNamesTheBoundCluster(t *testing.T) {
	bound := elected()
	bound.Spec.NodeName = flotillav1.VirtualNodeName("east")
	if o, c := admittedOutcome(bound); o != OutcomeElected || c != "east" {
		t.Errorf("bound: %s %q, want elected east", o, c)
	}
	if o, c := admittedOutcome(elected()); o != OutcomeWaiting || c != "" {
		t.Errorf("unbound: %s %q, want waiting and no cluster", o, c)
	}
}
