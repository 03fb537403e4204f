package cli

import (
	"bytes"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// A removed secondary leaves the ClusterSet: this primary's imports, their EndpointSlices and
// Services and its ClusterProperties go; a user's Service, another implementation's import and
// another primary's objects stay.
func TestRemoveSetMembershipDeletesOnlyThisPrimarys(t *testing.T) {
	obj := func(apiVersion, kind, ns, name string, labels map[string]string) runtime.Object {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetLabels(labels)
		return u
	}
	ours := map[string]string{flotillav1.LabelPrimary: "p1"}
	oursSlice := map[string]string{flotillav1.LabelPrimary: "p1", "endpointslice.kubernetes.io/managed-by": "flotilla.dev"}
	listKinds := map[schema.GroupVersionResource]string{
		{Group: "multicluster.x-k8s.io", Version: "v1beta1", Resource: "serviceimports"}: "ServiceImportList",
		{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}:           "EndpointSliceList",
		{Version: "v1", Resource: "services"}:                                            "ServiceList",
		{Group: "about.k8s.io", Version: "v1beta1", Resource: "clusterproperties"}:       "ClusterPropertyList",
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds,
		obj("multicluster.x-k8s.io/v1beta1", "ServiceImport", "shop", "web", ours),
		obj("multicluster.x-k8s.io/v1beta1", "ServiceImport", "shop", "theirs", nil),
		obj("multicluster.x-k8s.io/v1beta1", "ServiceImport", "shop", "other-primary", map[string]string{flotillav1.LabelPrimary: "p2"}),
		obj("discovery.k8s.io/v1", "EndpointSlice", "shop", "web-abc", oursSlice),
		obj("discovery.k8s.io/v1", "EndpointSlice", "shop", "web-xyz", nil),
		obj("v1", "Service", "shop", "flotilla-mcs-web", ours),
		obj("v1", "Service", "shop", "web", ours), // a copy of the primary's, not the import's: left to its owner
		obj("about.k8s.io/v1beta1", "ClusterProperty", "", "cluster.clusterset.k8s.io", ours),
		obj("about.k8s.io/v1beta1", "ClusterProperty", "", "fingerprint.example.com", nil),
	)
	var out bytes.Buffer
	if err := removeSetMembership(t.Context(), dyn, "east", "p1", &out); err != nil {
		t.Fatal(err)
	}
	var left []string
	for gvr := range listKinds {
		l, err := dyn.Resource(gvr).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range l.Items {
			left = append(left, gvr.Resource+" "+u.GetName())
		}
	}
	slices.Sort(left)
	want := []string{"clusterproperties fingerprint.example.com", "endpointslices web-xyz", "serviceimports other-primary", "serviceimports theirs", "services web"}
	if !slices.Equal(left, want) {
		t.Errorf("left %v, want %v (%s)", left, want, out.String())
	}
}
