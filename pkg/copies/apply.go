package copies

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/ssa"
)

// Apply writes a copy with server-side apply, as reflection's own field manager (no read first:
// Secrets may not be read there). A copy a Replicator holds is left to it (one owner per copy):
// Apply then writes nothing and says so. An immutable copy whose content changed is replaced.
func Apply(ctx context.Context, c client.Client, obj client.Object) (yielded bool, err error) {
	holder, err := ssa.Apply(ctx, c, obj, flotillav1.FieldManagerReflection, flotillav1.FieldManagerReplicator)
	if err != nil && apierrors.IsInvalid(err) {
		// An immutable ConfigMap or Secret cannot change: replace it. (A conflict with another
		// writer is found before validation, so this one is reflection's.)
		if derr := c.Delete(ctx, obj); derr != nil && !apierrors.IsNotFound(derr) {
			return false, fmt.Errorf("replacing immutable %s/%s: %w", obj.GetNamespace(), obj.GetName(), derr)
		}
		holder, err = ssa.Apply(ctx, c, obj, flotillav1.FieldManagerReflection, flotillav1.FieldManagerReplicator)
	}
	if err != nil {
		return false, fmt.Errorf("copying %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	return holder != "", nil
}
