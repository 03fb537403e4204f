package namespace

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestCreatedForDelegatesOnlyThisPrimarysOwnNamespaces(t *testing.T) {
	now := metav1.Now()
	made := map[string]string{flotillav1.LabelManagedBy: "p1", flotillav1.LabelPrimary: "p1"}
	for _, tc := range []struct {
		name string
		ns   corev1.Namespace
		want bool
	}{
		{"created for delegates", corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Labels: made}}, true},
		{"opened by an admin (managed-by only)", corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{flotillav1.LabelManagedBy: "p1"}}}, false},
		{"a Replicator's (it removes its own)", corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Labels: made,
			Annotations: map[string]string{flotillav1.AnnotationCreatedBy: "p1/uid"}}}, false},
		{"another primary's", corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{flotillav1.LabelManagedBy: "p2", flotillav1.LabelPrimary: "p2"}}}, false},
		{"already going", corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Labels: made, DeletionTimestamp: &now}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CreatedForDelegates(&tc.ns, "p1"); got != tc.want {
				t.Errorf("CreatedForDelegates = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	grace := time.Minute
	for _, tc := range []struct {
		name       string
		state      State
		emptySince time.Time
		now        time.Time
		want       Verdict
	}{
		{"foreign object, primary's gone: kept", State{Foreign: "ConfigMap team"}, time.Time{}, t0, Verdict{}},
		{"foreign object, long empty of ours: kept, clock reset", State{InPrimary: true, Foreign: "ConfigMap team"}, t0, t0.Add(time.Hour), Verdict{}},
		{"primary's gone: deleted with ours", State{HoldsOurs: true}, time.Time{}, t0, Verdict{Delete: true}},
		{"an import there, primary's gone: kept", State{Imported: true}, time.Time{}, t0, Verdict{}},
		{"an import there, long empty of all else: kept, clock reset", State{InPrimary: true, Imported: true}, t0, t0.Add(time.Hour), Verdict{}},
		{"in use: kept, clock reset", State{InPrimary: true, InUse: true}, t0, t0.Add(time.Hour), Verdict{}},
		{"a copy lives out its grace: kept", State{InPrimary: true, HoldsOurs: true}, t0, t0.Add(time.Hour), Verdict{}},
		{"first seen empty: the clock starts, never deleted now", State{InPrimary: true}, time.Time{}, t0, Verdict{EmptySince: t0}},
		{"empty for less than the grace: kept", State{InPrimary: true}, t0, t0.Add(59 * time.Second), Verdict{EmptySince: t0}},
		{"empty for the grace: deleted", State{InPrimary: true}, t0, t0.Add(grace), Verdict{Delete: true, EmptySince: t0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.state, tc.emptySince, tc.now, grace)
			got.Why = ""
			if got != tc.want {
				t.Errorf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}
