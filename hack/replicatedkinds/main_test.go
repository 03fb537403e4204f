package main

import (
	"errors"
	"testing"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// The committed Go file and CRD hold the rule the table gives: a kind added to the table without
// make generate fails here, before any cluster is needed.
func TestGeneratedFilesHoldTheTable(t *testing.T) {
	if err := check("../..", flotillav1.ReplicatedKinds); err != nil {
		t.Fatal(err)
	}
}

func TestCheckFindsAStaleFile(t *testing.T) {
	more := append([]flotillav1.ReplicatedKind{{Kind: "LimitRange", Version: "v1", Resource: "limitranges", Namespaced: true, InResources: true}},
		flotillav1.ReplicatedKinds...)
	if err := check("../..", more); !errors.Is(err, errStale) {
		t.Fatalf("check with a kind the files lack = %v, want stale", err)
	}
}

func TestCelOf(t *testing.T) {
	for _, tc := range []struct {
		name          string
		kinds         []string
		rule, message string
	}{
		{"one kind", []string{"ConfigMap"}, "self.all(r, r.kind in ['ConfigMap'])", "resources may only hold ConfigMap"},
		{"two kinds", []string{"ConfigMap", "Secret"}, "self.all(r, r.kind in ['ConfigMap', 'Secret'])", "resources may only hold ConfigMap or Secret"},
		{"three kinds", []string{"ConfigMap", "Secret", "Job"}, "self.all(r, r.kind in ['ConfigMap', 'Secret', 'Job'])",
			"resources may only hold ConfigMap, Secret or Job"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule, message := celOf(tc.kinds)
			if rule != tc.rule || message != tc.message {
				t.Errorf("celOf = %q, %q; want %q, %q", rule, message, tc.rule, tc.message)
			}
		})
	}
}

func TestAllowedRefusesWhatTheRuleCannotHold(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind flotillav1.ReplicatedKind
	}{
		{"a name CEL would have to escape", flotillav1.ReplicatedKind{Kind: "Config'Map", Namespaced: true, InResources: true}},
		{"a cluster-scoped kind", flotillav1.ReplicatedKind{Kind: "ClusterRole", InResources: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := allowed([]flotillav1.ReplicatedKind{tc.kind}); err == nil {
				t.Error("allowed")
			}
		})
	}
	if _, err := allowed([]flotillav1.ReplicatedKind{{Kind: "Certificate", Namespaced: true}}); err == nil {
		t.Error("a table allowing no kind in resources is allowed")
	}
}
