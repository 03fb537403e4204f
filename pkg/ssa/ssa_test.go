package ssa

import (
	"fmt"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestConflictingManagers(t *testing.T) {
	cause := func(msg string) metav1.StatusCause {
		return metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Message: msg, Field: ".metadata.annotations"}
	}
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"apply manager", apierrors.NewApplyConflict([]metav1.StatusCause{cause(`conflict with "flotilla-replicator"`)}, "x"), []string{"flotilla-replicator"}},
		{"update manager with version and time", apierrors.NewApplyConflict([]metav1.StatusCause{
			cause(`conflict with "kubectl-edit" using v1 at 2026-11-22T10:00:00Z`),
			cause(`conflict with "kubectl-edit" using v1 at 2026-11-22T10:00:00Z`),
			cause(`conflict with "plumber" with subresource "status"`)}, "x"), []string{"kubectl-edit", "plumber"}},
		{"a quote in the name", apierrors.NewApplyConflict([]metav1.StatusCause{cause(`conflict with "a\"b"`)}, "x"), []string{`a"b`}},
		{"other causes", apierrors.NewApplyConflict([]metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Message: `conflict with "x"`}}, "x"), nil},
		{"not a status", fmt.Errorf("boom"), nil},
		{"wrapped", fmt.Errorf("applying: %w", apierrors.NewApplyConflict([]metav1.StatusCause{cause(`conflict with "m"`)}, "x")), []string{"m"}},
		{"garbled", apierrors.NewApplyConflict([]metav1.StatusCause{cause(`conflict with m`)}, "x"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ConflictingManagers(tc.err); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
