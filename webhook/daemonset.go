package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// DaemonSetPath is where the DaemonSet mutation is served.
const DaemonSetPath = "/mutate-apps-v1-daemonset"

// ExcludeVirtualNodes adds flotillav1.VirtualNodeExclusion to every required node-affinity term of a pod
// template (one term when there is none) and says whether it changed anything.
//
// Why a mutation: a DaemonSet pod on a virtual node never runs (there is nothing to run it on),
// and the DaemonSet controller counts a node as one it must cover when only node name, affinity and
// taints allow it. A tolerate-all DaemonSet would then wait forever for pods that cannot become
// available, and its rolling update would stall on the real nodes too (maxUnavailable is used up
// by the virtual ones). Only affinity takes the node out of the DaemonSet's desired count.
func ExcludeVirtualNodes(spec *corev1.PodSpec) bool {
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	req := na.RequiredDuringSchedulingIgnoredDuringExecution
	if len(req.NodeSelectorTerms) == 0 {
		req.NodeSelectorTerms = []corev1.NodeSelectorTerm{{}}
	}
	changed := false
	for i := range req.NodeSelectorTerms {
		term := &req.NodeSelectorTerms[i]
		if !excludes(term.MatchExpressions) {
			term.MatchExpressions = append(term.MatchExpressions, flotillav1.VirtualNodeExclusion())
			changed = true
		}
	}
	return changed
}

// excludes says whether a term already keeps virtual nodes out.
func excludes(exprs []corev1.NodeSelectorRequirement) bool {
	for _, e := range exprs {
		if e.Key == flotillav1.LabelNodeType && e.Operator == corev1.NodeSelectorOpNotIn && slices.Contains(e.Values, flotillav1.NodeTypeVirtualKubelet) {
			return true
		}
	}
	return false
}

// DaemonSetHandler keeps DaemonSets of the primary off virtual nodes.
type DaemonSetHandler struct {
	Decoder admission.Decoder
}

var _ admission.Handler = (*DaemonSetHandler)(nil)

// Handle adds the virtual-node exclusion to a DaemonSet's pod template.
func (h *DaemonSetHandler) Handle(_ context.Context, req admission.Request) admission.Response {
	ds := &appsv1.DaemonSet{}
	if err := h.Decoder.Decode(req, ds); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if !ExcludeVirtualNodes(&ds.Spec.Template.Spec) {
		return admission.Allowed("virtual nodes already excluded")
	}
	raw, err := json.Marshal(ds)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}
