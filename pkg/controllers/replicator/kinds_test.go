package replicator

import (
	"errors"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func object(apiVersion, kind, name string, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": "ns", "generation": int64(2)}}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

func TestKindIn(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.AddSpecific(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"},
		schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, schema.GroupVersionResource{}, meta.RESTScopeNamespace)
	mapper.AddSpecific(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Globe"},
		schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "globes"}, schema.GroupVersionResource{}, meta.RESTScopeRoot)
	cases := []struct {
		name, apiVersion, kind string
		primary                bool
		wantResource           string
		wantReason, wantMsg    string
	}{
		{name: "a special kind needs no lookup", apiVersion: "apps/v1", kind: "Deployment", wantResource: "deployments"},
		{name: "a custom kind served", apiVersion: "example.com/v1", kind: "Widget", wantResource: "widgets"},
		{name: "a custom kind not served in a secondary names it and the way out", apiVersion: "example.com/v1", kind: "Gadget",
			wantReason: flotillav1.ReasonKindMissing, wantMsg: "kind Gadget (example.com/v1) is not served in eu: its CustomResourceDefinition is not installed there; install it there, or set replicateCRDs"},
		{name: "not served in the primary", apiVersion: "example.com/v1", kind: "Gadget", primary: true,
			wantReason: flotillav1.ReasonKindMissing, wantMsg: "is not served in eu: its CustomResourceDefinition is not installed there"},
		{name: "cluster-scoped", apiVersion: "example.com/v1", kind: "Globe", wantReason: flotillav1.ReasonKindNotAllowed, wantMsg: "is cluster-scoped in eu"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, err := kindIn(mapper, object(tc.apiVersion, tc.kind, "o", nil), "eu", tc.primary)
			if tc.wantReason != "" {
				var p *KindProblem
				if !errors.As(err, &p) || p.Reason != tc.wantReason || !strings.Contains(p.Message, tc.wantMsg) {
					t.Fatalf("err = %v, want %s %q", err, tc.wantReason, tc.wantMsg)
				}
				if tc.primary && strings.Contains(p.Message, "replicateCRDs") {
					t.Errorf("the primary's message points at replicateCRDs: %s", p.Message)
				}
				return
			}
			if err != nil || k.Resource != tc.wantResource {
				t.Fatalf("kind = %+v, %v; want resource %s", k, err, tc.wantResource)
			}
		})
	}
}

func TestNotAllowedNamesWhoAllows(t *testing.T) {
	k := flotillav1.KindFor(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, "widgets", true)
	rbac := apierrors.NewForbidden(schema.GroupResource{Group: "example.com", Resource: "widgets"}, "w",
		errors.New(`User "system:serviceaccount:flotilla-system:flotilla-x" cannot patch resource "widgets" in API group "example.com" in the namespace "ns"`))
	policy := apierrors.NewForbidden(schema.GroupResource{Group: "example.com", Resource: "widgets"}, "w",
		errors.New(`ValidatingAdmissionPolicy 'flotilla-x-managed-namespaces' denied request: Flotilla may write only in namespaces labelled`))
	if got := notAllowed(rbac, k, "eu", false).Error(); !strings.Contains(got, "flotillactl cluster join --kinds widgets.example.com") {
		t.Errorf("secondary: %s", got)
	}
	if got := notAllowed(rbac, k, "primary", true).Error(); !strings.Contains(got, "the chart's replicator.kinds") {
		t.Errorf("primary: %s", got)
	}
	if got := notAllowed(policy, k, "eu", false); !errors.Is(got, policy) || kindProblemOf(got) != "" {
		t.Errorf("an admission refusal is not about the kind's rights: %v", got)
	}
}

func TestStatusHealth(t *testing.T) {
	cond := func(typ, status, reason, msg string) map[string]any {
		return map[string]any{"observedGeneration": int64(2), "conditions": []any{map[string]any{"type": typ, "status": status, "reason": reason, "message": msg}}}
	}
	cases := []struct {
		name    string
		status  map[string]any
		healthy bool
		failing bool
		reason  string
	}{
		{name: "no status at all: nothing says otherwise", healthy: true, reason: HealthCurrent},
		{name: "Ready True", status: cond("Ready", "True", "Ok", ""), healthy: true, reason: HealthCurrent},
		{name: "Ready False", status: cond("Ready", "False", "Syncing", "not yet"), reason: HealthProgressing},
		{name: "Stalled", status: cond("Stalled", "True", "BadSpec", "cannot"), failing: true, reason: HealthStalled},
		{name: "Reconciling", status: cond("Reconciling", "True", "Working", ""), reason: HealthProgressing},
		{name: "its generation not yet observed", status: map[string]any{"observedGeneration": int64(1)}, reason: HealthProgressing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := StatusHealth(object("example.com/v1", "Widget", "w", tc.status))
			if h.Healthy != tc.healthy || h.Failing != tc.failing || h.Reason != tc.reason || h.Kind != "Widget" || h.Name != "w" || h.Message == "" {
				t.Errorf("health = %+v", h)
			}
		})
	}
}

func TestDefinitionCopy(t *testing.T) {
	def := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", ResourceVersion: "9", UID: "u",
		Labels: map[string]string{"app": "w"}, Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}", "doc": "x"}},
		Spec:   apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.NamespaceScoped},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{AcceptedNames: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget"}}}
	got := DefinitionCopy(def, "p1")
	if got.ResourceVersion != "" || got.UID != "" || got.Status.AcceptedNames.Kind != "" || got.Kind != "CustomResourceDefinition" {
		t.Errorf("carries more than name, labels, annotations and spec: %+v", got)
	}
	if got.Labels[flotillav1.LabelPrimary] != "p1" || got.Labels["app"] != "w" || def.Labels[flotillav1.LabelPrimary] != "" {
		t.Errorf("labels = %v (the primary's %v)", got.Labels, def.Labels)
	}
	if _, ok := got.Annotations["kubectl.kubernetes.io/last-applied-configuration"]; ok || got.Annotations["doc"] != "x" {
		t.Errorf("annotations = %v", got.Annotations)
	}
	if got.Spec.Group != "example.com" {
		t.Errorf("spec = %+v", got.Spec)
	}
}
