package webhook

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// reviewsAllowing answers SubjectAccessReviews: allowed when allow says so.
type reviewsAllowing struct {
	client.Writer
	allow func(*authorizationv1.ResourceAttributes) bool
	asked int
}

func (r *reviewsAllowing) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	sar := obj.(*authorizationv1.SubjectAccessReview)
	r.asked++
	sar.Status.Allowed = r.allow(sar.Spec.ResourceAttributes)
	return nil
}

func overrideRequest(t *testing.T, o *flotillav1.Override) admission.Request {
	t.Helper()
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Namespace: "shop",
		Object: runtime.RawExtension{Raw: raw}, UserInfo: authenticationv1.UserInfo{Username: "tenant"}}}
}

func TestOverrideHandler(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = flotillav1.AddToScheme(scheme)
	deployments := flotillav1.OverrideRule{Name: "size", Targets: []flotillav1.OverrideTarget{{Kind: "Deployment"}}}
	for name, tc := range map[string]struct {
		rule      flotillav1.OverrideRule
		mayDeploy bool
		want      string
	}{
		"allowed: the author may write Deployments there": {deployments, true, ""},
		"refused: the author may not":                     {deployments, false, `user "tenant" may not create deployments.apps in namespace shop`},
		"refused by the fence, whoever asks": {flotillav1.OverrideRule{Name: "root", Targets: []flotillav1.OverrideTarget{{Kind: "Pod"}},
			JSONPatch: []flotillav1.JSONPatchOperation{{Op: "add", Path: "/spec/volumes/-", Value: &apiextensionsv1.JSON{Raw: []byte(`{"name":"r","hostPath":{"path":"/"}}`)}}}},
			true, "writes hostPath, which the fence of every secondary keeps out"},
	} {
		reviews := &reviewsAllowing{allow: func(a *authorizationv1.ResourceAttributes) bool { return tc.mayDeploy || a.Resource != "deployments" }}
		h := &OverrideHandler{Decoder: admission.NewDecoder(scheme), Reviews: reviews}
		resp := h.Handle(t.Context(), overrideRequest(t, &flotillav1.Override{ObjectMeta: metav1.ObjectMeta{Name: "o", Namespace: "shop"},
			Spec: flotillav1.OverrideSpec{Rules: []flotillav1.OverrideRule{tc.rule}}}))
		switch {
		case tc.want == "" && !resp.Allowed:
			t.Errorf("%s: refused: %s", name, resp.Result.Message)
		case tc.want != "" && (resp.Allowed || !strings.Contains(resp.Result.Message, tc.want)):
			t.Errorf("%s: %v %q, want refused saying %q", name, resp.Allowed, resp.Result.Message, tc.want)
		}
	}
}

// A rule on a custom kind needs the author's rights on the resource the primary serves it as; a
// custom kind the primary does not serve refuses the Override.
func TestOverrideRightsOfACustomKind(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "monitoring.coreos.com", Version: "v1"}})
	mapper.AddSpecific(schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"},
		schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}, schema.GroupVersionResource{}, meta.RESTScopeNamespace)
	spec := func(group, kind string) flotillav1.OverrideSpec {
		return flotillav1.OverrideSpec{Rules: []flotillav1.OverrideRule{{Name: "r", Targets: []flotillav1.OverrideTarget{{Kind: kind, APIGroup: group}}}}}
	}
	got, err := OverrideRights("shop", spec("monitoring.coreos.com", "ServiceMonitor"), mapper)
	want := []Right{{Verb: "create", Group: "monitoring.coreos.com", Resource: "servicemonitors", Namespace: "shop"},
		{Verb: "update", Group: "monitoring.coreos.com", Resource: "servicemonitors", Namespace: "shop"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("rights = %v, %v; want %v", got, err, want)
	}
	if got, err := OverrideRights("shop", spec("", "Deployment"), mapper); err != nil || len(got) != 2 || got[0].Resource != "deployments" {
		t.Errorf("a kind of the table: %v, %v", got, err)
	}
	if _, err := OverrideRights("shop", spec("example.com", "Gadget"), mapper); err == nil || !strings.Contains(err.Error(), "not served by the primary") {
		t.Errorf("a kind the primary does not serve: %v", err)
	}
}
