package ssa

import (
	"context"
	"errors"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Apply applies obj as manager without force first. When that conflicts with fields held by
// one of yieldTo, the object is theirs: nothing is written and Apply returns that manager.
// Any other conflict (a user's kubectl edit of a copy, a field manager of an older release) is
// overwritten: obj is applied again with force. On success obj holds what the API server
// returned, its resourceVersion included.
func Apply(ctx context.Context, c client.Client, obj client.Object, manager string, yieldTo ...string) (string, error) {
	err := c.Patch(ctx, obj, client.Apply, client.FieldOwner(manager)) //nolint:staticcheck // typed and unstructured apply alike
	if err == nil || !apierrors.IsConflict(err) {
		return "", err
	}
	for _, m := range ConflictingManagers(err) {
		for _, y := range yieldTo {
			if m == y {
				return m, nil
			}
		}
	}
	return "", c.Patch(ctx, obj, client.Apply, client.FieldOwner(manager), client.ForceOwnership) //nolint:staticcheck // as above
}

// ConflictingManagers lists the field managers an apply conflict names (without duplicates).
func ConflictingManagers(err error) []string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, cause := range status.Status().Details.Causes {
		if cause.Type != metav1.CauseTypeFieldManagerConflict {
			continue
		}
		m, ok := managerOf(cause.Message)
		if ok && !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}

// managerOf reads the manager out of `conflict with "name"[ using v1| with subresource ...]`.
func managerOf(msg string) (string, bool) {
	rest, ok := strings.CutPrefix(msg, "conflict with ")
	if !ok {
		return "", false
	}
	quoted, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return "", false
	}
	m, err := strconv.Unquote(quoted)
	if err != nil {
		return "", false
	}
	return m, true
}

// Holds says whether manager holds any field of obj (its managedFields name it).
func Holds(obj metav1.Object, manager string) bool {
	for _, m := range obj.GetManagedFields() {
		if m.Manager == manager {
			return true
		}
	}
	return false
}
