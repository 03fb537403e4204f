package webhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	admissionv1 "k8s.io/api/admission/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/overrides"
)

// OverridePath serves the check of an Override's author.
const OverridePath = "/validate-flotilla-dev-v1alpha1-override"

// OverrideHandler refuses an Override (at CREATE, and at UPDATE when its spec changes) that would
// send to a secondary what its author may not write, or what no tenant may: one SubjectAccessReview
// per kind it targets (update and create of that kind in its namespace, as that user), and the
// fence's refusals (overrides.Refusals: host access, privilege, another namespace, Flotilla's own
// marks). Without it, whoever may write Overrides would change other people's pods with the
// manager's rights.
type OverrideHandler struct {
	Decoder admission.Decoder
	// Reviews creates the SubjectAccessReviews (the API server answers them).
	Reviews client.Writer
	// Mapper finds the resource of a custom kind a rule targets (the primary's discovery).
	Mapper meta.RESTMapper
}

var _ admission.Handler = (*OverrideHandler)(nil)

// Handle allows the Override or denies it saying why.
func (h *OverrideHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	o := &flotillav1.Override{}
	if err := h.Decoder.Decode(req, o); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if req.Operation == admissionv1.Update {
		old := &flotillav1.Override{}
		if err := h.Decoder.DecodeRaw(req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		if apiequality.Semantic.DeepEqual(old.Spec, o.Spec) {
			return admission.Allowed("spec unchanged")
		}
	}
	if refusals := overrides.Refusals(o.Spec); len(refusals) > 0 {
		log.FromContext(ctx).Info("Override refused by the fence", "namespace", req.Namespace, "name", o.Name, "user", req.UserInfo.Username)
		return admission.Denied(fmt.Sprintf("Override %s: %s", o.Name, strings.Join(refusals, "; ")))
	}
	rights, err := OverrideRights(req.Namespace, o.Spec, h.Mapper)
	if err != nil {
		return admission.Denied(fmt.Sprintf("Override %s: %v", o.Name, err))
	}
	missing, err := missingRights(ctx, h.Reviews, req.UserInfo, rights)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if len(missing) == 0 {
		return admission.Allowed("")
	}
	log.FromContext(ctx).Info("Override refused", "namespace", req.Namespace, "name", o.Name, "user", req.UserInfo.Username, "missing", len(missing))
	return admission.Denied(fmt.Sprintf("Override %s: user %q may not %s; an Override changes only what its author may write (the manager's rights are not lent)",
		o.Name, req.UserInfo.Username, namedRights(missing)))
}

// OverrideRights are what an Override's author must hold in its namespace: create and update of
// every kind its rules target (a custom kind's resource as the primary serves it, found by
// mapper). An error is a custom kind the primary does not serve.
func OverrideRights(namespace string, spec flotillav1.OverrideSpec, mapper meta.RESTMapper) ([]Right, error) {
	var out []Right
	for _, rule := range spec.Rules {
		for _, t := range rule.Targets {
			gr, ok := overrides.TargetKinds[t.Kind]
			switch {
			case ok && (t.APIGroup == "" || t.APIGroup == gr.Group):
			case t.APIGroup == "":
				continue // refused by overrides.Refusals
			case mapper == nil:
				return nil, fmt.Errorf("rule %s: kind %s of %s cannot be looked up", rule.Name, t.Kind, t.APIGroup)
			default:
				m, err := mapper.RESTMapping(schema.GroupKind{Group: t.APIGroup, Kind: t.Kind})
				if err != nil {
					return nil, fmt.Errorf("rule %s: kind %s of %s is not served by the primary: %w", rule.Name, t.Kind, t.APIGroup, err)
				}
				gr = m.Resource.GroupResource()
			}
			for _, verb := range []string{"create", "update"} {
				r := Right{Verb: verb, Group: gr.Group, Resource: gr.Resource, Namespace: namespace}
				if !slices.Contains(out, r) {
					out = append(out, r)
				}
			}
		}
	}
	return out, nil
}
