package mcs

import "testing"

func TestKindsNameTheirResources(t *testing.T) {
	got := ServiceImports.Versions()
	if len(got) != 2 || got[0].String() != "multicluster.x-k8s.io/v1beta1, Resource=serviceimports" ||
		got[1].String() != "multicluster.x-k8s.io/v1alpha1, Resource=serviceimports" {
		t.Errorf("ServiceImports' versions: %v", got)
	}
	if gk := ServiceExports.GroupKind(); gk.String() != "ServiceExport.multicluster.x-k8s.io" {
		t.Errorf("ServiceExports' group and kind: %s", gk)
	}
	if len(Kinds) != 2 {
		t.Errorf("the table: %v", Kinds)
	}
}
