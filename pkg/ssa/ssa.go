package ssa

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// WouldChange says whether applying obj as manager would change the live object: a server-side dry
// run of the apply, compared with the object as it is, its managed fields, resourceVersion and
// status aside. A process whose
// Ledger has no entry for an object (it just started, or was upgraded) asks this before applying
// what an earlier process applied: a no-op apply is a write all the same (an admission pass, an
// audit event, a read-modify of etcd), for every object of every cluster at once. An error (a
// conflict, the object gone) is for the apply itself to handle; WouldChange then says true.
func WouldChange(ctx context.Context, c client.Client, obj *unstructured.Unstructured, manager string) (bool, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
		return true, err
	}
	dry := obj.DeepCopy()
	if err := c.Patch(ctx, dry, client.Apply, client.FieldOwner(manager), client.DryRunAll); err != nil { //nolint:staticcheck // as Apply
		return true, err
	}
	// What moves on its own between the read and the dry run (a Deployment's status, and with it
	// the resourceVersion) is no change the apply would make.
	for _, o := range []*unstructured.Unstructured{live, dry} {
		o.SetManagedFields(nil)
		o.SetResourceVersion("")
		unstructured.RemoveNestedField(o.Object, "status")
	}
	return !equality.Semantic.DeepEqual(live.Object, dry.Object), nil
}
