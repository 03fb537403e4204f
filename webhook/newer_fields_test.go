package webhook

import (
	"encoding/json"
	"testing"

	jsonpatchapply "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/clusters/views"
)

func TestPointsInto(t *testing.T) {
	var doc any
	if err := json.Unmarshal([]byte(`{"spec":{"containers":[{"name":"c"}],"a/b":{"~x":1}}}`), &doc); err != nil {
		t.Fatal(err)
	}
	for pointer, want := range map[string]bool{
		"":                               true,
		"/spec":                          true,
		"/spec/containers/0/name":        true,
		"/spec/containers/1":             false,
		"/spec/containers/x":             false,
		"/spec/schedulingGroup":          false,
		"/spec/a~1b/~0x":                 true,
		"/spec/containers/0/name/deeper": false,
		"spec":                           false,
	} {
		if got := pointsInto(doc, pointer); got != want {
			t.Errorf("pointsInto(%q) = %v, want %v", pointer, got, want)
		}
	}
}

// A pod's fields that the manager's API types do not know (a primary newer than them) stay on the
// proxy: the webhook's patch removes only what it decoded. Before, the patch from the request's
// object to the mutated one removed spec.schedulingGroup and any newer container field.
func TestTheProxyKeepsFieldsNewerThanTheManagersTypes(t *testing.T) {
	scheme := clusters.NewScheme()
	fleet := registered{{Name: "east", Role: clusters.RoleSecondary, ID: "e", Status: flotillav1.ClusterRunning, CapacitySynced: true}}
	h := &Handler{Views: &views.Gatherer{Registry: fleet}, Decoder: admission.NewDecoder(scheme),
		SealKey: []byte("0123456789abcdef0123456789abcdef")}
	for name, tc := range map[string]struct {
		group       bool
		claimed     string
		wantGroupAn string
	}{
		"names a PodGroup":                          {group: true, wantGroupAn: "trainers"},
		"names a PodGroup and claims another":       {group: true, claimed: "other", wantGroupAn: "trainers"},
		"names none, claims one in its annotations": {claimed: "other"},
	} {
		t.Run(name, func(t *testing.T) {
			pod := elected()
			if tc.claimed != "" {
				pod.Annotations[flotillav1.AnnotationPodGroup] = tc.claimed
			}
			typed, err := json.Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := json.Unmarshal(typed, &doc); err != nil {
				t.Fatal(err)
			}
			spec := doc["spec"].(map[string]any)
			if tc.group {
				spec["schedulingGroup"] = map[string]any{"podGroupName": "trainers"}
			}
			spec["containers"].([]any)[0].(map[string]any)["futureField"] = "kept"
			raw, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			resp := h.Handle(t.Context(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: pod.Namespace,
				Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}})
			if !resp.Allowed {
				t.Fatalf("refused: %v", resp.Result)
			}
			ops, err := json.Marshal(resp.Patches)
			if err != nil {
				t.Fatal(err)
			}
			patch, err := jsonpatchapply.DecodePatch(ops)
			if err != nil {
				t.Fatal(err)
			}
			patched, err := patch.Apply(raw)
			if err != nil {
				t.Fatalf("the patch does not apply to the request's object: %v\n%s", err, ops)
			}
			var got struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
				Spec struct {
					SchedulingGroup *struct {
						PodGroupName string `json:"podGroupName"`
					} `json:"schedulingGroup"`
					Containers []map[string]any `json:"containers"`
				} `json:"spec"`
			}
			if err := json.Unmarshal(patched, &got); err != nil {
				t.Fatal(err)
			}
			if tc.group && (got.Spec.SchedulingGroup == nil || got.Spec.SchedulingGroup.PodGroupName != "trainers") {
				t.Errorf("spec.schedulingGroup = %+v after the patch, want podGroupName trainers kept\npatch: %s", got.Spec.SchedulingGroup, ops)
			}
			if got.Spec.Containers[0]["futureField"] != "kept" {
				t.Errorf("the container's futureField is gone after the patch\npatch: %s", ops)
			}
			if a, ok := got.Metadata.Annotations[flotillav1.AnnotationPodGroup]; a != tc.wantGroupAn || ok != (tc.wantGroupAn != "") {
				t.Errorf("annotation %s = %q (set %v), want %q", flotillav1.AnnotationPodGroup, a, ok, tc.wantGroupAn)
			}
		})
	}
}
