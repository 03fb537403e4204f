package overrides

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// TargetKinds are the kinds a rule may target, with the resource an Override's author must be
// allowed to write to change them: what Flotilla sends to secondaries, an elected pod's delegate
// and the kinds a Replicator writes (flotillav1.ReplicatedKinds, the one table of them).
var TargetKinds = func() map[string]schema.GroupResource {
	out := map[string]schema.GroupResource{"Pod": {Resource: "pods"}}
	for _, k := range flotillav1.ReplicatedKinds {
		out[k.Kind] = schema.GroupResource{Group: k.Group, Resource: k.Resource}
	}
	return out
}()

// TargetGroup is the API group of a target's kind: its APIGroup, else the group of the kind
// Flotilla handles by that name (core for Pod).
func TargetGroup(t flotillav1.OverrideTarget) string {
	if t.APIGroup != "" {
		return t.APIGroup
	}
	return TargetKinds[t.Kind].Group
}

// fenced are the fields no tenant's Override may write into what goes to a secondary, whatever
// the namespace's Pod Security level: each would take the pod out of its namespace's confinement
// (the host's filesystem, network, processes, or more privilege), or move an object elsewhere.
var fenced = []string{"hostPath", "privileged", "hostNetwork", "hostPID", "hostIPC", "hostUsers", "allowPrivilegeEscalation",
	"capabilities", "procMount", "seLinuxOptions", "hostPort", "namespace", "ownerReferences", "nodeName"}

// Refusals are why a tenant's Override may not be admitted, "" for none: a target kind Flotilla
// sends nothing of, a flotilla.dev/ label or annotation (Flotilla's own marks: whose object it is,
// which proxy a delegate stands for), and a JSON patch that names a fenced field in its path or its
// value.
func Refusals(spec flotillav1.OverrideSpec) []string {
	var out []string
	for i, rule := range spec.Rules {
		name := rule.Name
		if name == "" {
			name = fmt.Sprintf("#%d", i+1)
		}
		for _, t := range rule.Targets {
			if _, ok := TargetKinds[t.Kind]; !ok && t.APIGroup == "" {
				out = append(out, fmt.Sprintf("rule %s: kind %s is not one Flotilla handles by name (%s): a custom resource's kind needs its apiGroup",
					name, t.Kind, strings.Join(sortedKinds(), ", ")))
			}
			if flotillav1.FlotillaGroup(t.APIGroup) {
				out = append(out, fmt.Sprintf("rule %s: Flotilla's own kinds are not sent to secondaries", name))
			}
		}
		for _, m := range []map[string]string{rule.Labels, rule.Annotations} {
			for k := range m {
				if strings.HasPrefix(k, flotillav1.GroupVersion.Group+"/") {
					out = append(out, fmt.Sprintf("rule %s: %s is Flotilla's own mark", name, k))
				}
			}
		}
		for _, op := range rule.JSONPatch {
			text := op.Path + " " + op.From
			if op.Value != nil {
				text += " " + string(op.Value.Raw)
			}
			for _, f := range fenced {
				if mentions(text, f) {
					out = append(out, fmt.Sprintf("rule %s: its JSON patch writes %s, which the fence of every secondary keeps out of what Flotilla sends", name, f))
				}
			}
			if strings.Contains(text, flotillav1.GroupVersion.Group+"~1") || strings.Contains(text, `"`+flotillav1.GroupVersion.Group+"/") {
				out = append(out, fmt.Sprintf("rule %s: its JSON patch writes a flotilla.dev/ mark, which is Flotilla's own", name))
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// mentions says whether a JSON pointer or JSON text names a field: as a path segment or a key.
func mentions(text, field string) bool {
	return strings.Contains(text, "/"+field) || strings.Contains(text, `"`+field+`"`)
}

func sortedKinds() []string {
	return slices.Sorted(maps.Keys(TargetKinds))
}

// marksKept fails when the rules changed a flotilla.dev/ label or annotation of the object:
// Flotilla's own marks say whose object it is, and which proxy a delegate stands for.
func marksKept(before, after *unstructured.Unstructured) error {
	for _, pair := range [][2]map[string]string{{before.GetLabels(), after.GetLabels()}, {before.GetAnnotations(), after.GetAnnotations()}} {
		for _, m := range []map[string]string{pair[0], pair[1]} {
			for k := range m {
				if strings.HasPrefix(k, flotillav1.GroupVersion.Group+"/") && pair[0][k] != pair[1][k] {
					return fmt.Errorf("it changes %s, Flotilla's own mark", k)
				}
			}
		}
	}
	return nil
}
