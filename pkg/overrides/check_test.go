package overrides

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestRefusals(t *testing.T) {
	patch := func(path, value string) flotillav1.OverrideRule {
		r := flotillav1.OverrideRule{Name: "p", Targets: []flotillav1.OverrideTarget{{Kind: "Pod"}},
			JSONPatch: []flotillav1.JSONPatchOperation{{Op: "add", Path: path}}}
		if value != "" {
			r.JSONPatch[0].Value = &apiextensionsv1.JSON{Raw: []byte(value)}
		}
		return r
	}
	for name, tc := range map[string]struct {
		rule flotillav1.OverrideRule
		want string
	}{
		"a hostPath volume":               {patch("/spec/volumes/-", `{"name":"root","hostPath":{"path":"/"}}`), "writes hostPath"},
		"a privileged container":          {patch("/spec/containers/0/securityContext", `{"privileged":true}`), "writes privileged"},
		"host networking by path":         {patch("/spec/hostNetwork", `true`), "writes hostNetwork"},
		"another namespace":               {patch("/metadata/namespace", `"kube-system"`), "writes namespace"},
		"a mark by patch":                 {patch("/metadata/labels/flotilla.dev~1primary", `"x"`), "flotilla.dev/ mark"},
		"a mark by label":                 {flotillav1.OverrideRule{Name: "l", Targets: []flotillav1.OverrideTarget{{Kind: "Pod"}}, Labels: map[string]string{flotillav1.LabelPrimary: ""}}, "Flotilla's own mark"},
		"a kind Flotilla never sends":     {flotillav1.OverrideRule{Name: "k", Targets: []flotillav1.OverrideTarget{{Kind: "Node"}}, Replicas: ptr.To[int32](1)}, "kind Node is not one"},
		"a custom kind without its group": {flotillav1.OverrideRule{Name: "c", Targets: []flotillav1.OverrideTarget{{Kind: "ServiceMonitor"}}}, "needs its apiGroup"},
		"a custom kind with its group": {flotillav1.OverrideRule{Name: "c", Targets: []flotillav1.OverrideTarget{{Kind: "ServiceMonitor", APIGroup: "monitoring.coreos.com"}},
			Labels: map[string]string{"tier": "edge"}}, ""},
		"Flotilla's own kinds": {flotillav1.OverrideRule{Name: "f", Targets: []flotillav1.OverrideTarget{{Kind: "Replicator", APIGroup: "flotilla.dev"}}}, "Flotilla's own kinds"},
		"an env value is fine": {flotillav1.OverrideRule{Name: "e", Targets: []flotillav1.OverrideTarget{{Kind: "Pod"}}, Env: []flotillav1.EnvOverride{{Op: "Add", Name: "HOST", Value: "hostPath"}}}, ""},
		"a harmless patch":     {patch("/spec/priorityClassName", `"batch"`), ""},
	} {
		got := strings.Join(Refusals(flotillav1.OverrideSpec{Rules: []flotillav1.OverrideRule{tc.rule}}), "; ")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}

func TestApplyNeverChangesFlotillasMarks(t *testing.T) {
	in := deployment()
	in.SetLabels(map[string]string{flotillav1.LabelPrimary: "p1", "app": "web"})
	_, _, err := Apply(in, ObjectSubject(in), eu, []Source{{Kind: "ClusterOverride", Name: "admin", Spec: flotillav1.OverrideSpec{Rules: []flotillav1.OverrideRule{{
		Name: "relabel", Targets: []flotillav1.OverrideTarget{{Kind: "Deployment"}},
		JSONPatch: []flotillav1.JSONPatchOperation{{Op: "remove", Path: "/metadata/labels/flotilla.dev~1primary"}}}}}}})
	if err == nil || !strings.Contains(err.Error(), "Flotilla's own mark") {
		t.Errorf("a rule removing flotilla.dev/primary: %v", err)
	}
}
