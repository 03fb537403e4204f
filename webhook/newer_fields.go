package webhook

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
)

// The API server may serve fields newer than the API types the manager decodes pods with (a
// primary on a newer minor). Decoding drops them; a patch computed from the request's object to
// the mutated one would then remove them, and the proxy would lose what its author wrote
// (spec.schedulingGroup on Kubernetes 1.36+, for one).

// keepNewerFields drops from ops each removal of a field the decoded object did not have: one
// its types do not know. decoded is the request's object as decoded, before any change; what the
// webhook means to remove it removes from what it decoded, so such a removal is never its own.
func keepNewerFields(decoded []byte, ops []jsonpatch.Operation) []jsonpatch.Operation {
	var doc any
	if err := json.Unmarshal(decoded, &doc); err != nil {
		return ops
	}
	kept := ops[:0]
	for _, op := range ops {
		if op.Operation == "remove" && !pointsInto(doc, op.Path) {
			continue
		}
		kept = append(kept, op)
	}
	return kept
}

// pointsInto says whether a JSON pointer (RFC 6901) names a value of doc.
func pointsInto(doc any, pointer string) bool {
	if pointer == "" {
		return true
	}
	if !strings.HasPrefix(pointer, "/") {
		return false
	}
	at := doc
	for _, token := range strings.Split(pointer[1:], "/") {
		token = strings.ReplaceAll(strings.ReplaceAll(token, "~1", "/"), "~0", "~")
		switch v := at.(type) {
		case map[string]any:
			next, ok := v[token]
			if !ok {
				return false
			}
			at = next
		case []any:
			i, err := strconv.Atoi(token)
			if err != nil || i < 0 || i >= len(v) {
				return false
			}
			at = v[i]
		default:
			return false
		}
	}
	return true
}

// podGroupOf reads spec.schedulingGroup.podGroupName from a pod's JSON ("": none): the field
// (Kubernetes 1.36+) is newer than the API types the manager decodes pods with.
func podGroupOf(raw []byte) string {
	if !bytes.Contains(raw, []byte(`"schedulingGroup"`)) {
		return "" // most pods: no second parse of the whole object
	}
	var pod struct {
		Spec struct {
			SchedulingGroup *struct {
				PodGroupName *string `json:"podGroupName"`
			} `json:"schedulingGroup"`
		} `json:"spec"`
	}
	if json.Unmarshal(raw, &pod) != nil || pod.Spec.SchedulingGroup == nil || pod.Spec.SchedulingGroup.PodGroupName == nil {
		return ""
	}
	return *pod.Spec.SchedulingGroup.PodGroupName
}
