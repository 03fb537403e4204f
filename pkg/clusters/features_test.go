package clusters

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A cluster's features are what its discovery serves: a subresource counts, any listed version
// does, a group whose discovery failed is missing saying so, and each missing one says what
// Flotilla does without it.
func TestMissingFeaturesAreReadFromDiscovery(t *testing.T) {
	lists := []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "pods"}, {Name: "pods/resize"}}},
		{GroupVersion: "admissionregistration.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "validatingadmissionpolicies"}}},
		{GroupVersion: "multicluster.x-k8s.io/v1alpha1", APIResources: []metav1.APIResource{{Name: "serviceexports"}}},
		{GroupVersion: "about.k8s.io/v1alpha1", APIResources: []metav1.APIResource{{Name: "clusterproperties"}}},
		// resource.k8s.io served only at v1beta2: not the version Flotilla reads.
		{GroupVersion: "resource.k8s.io/v1beta2", APIResources: []metav1.APIResource{{Name: "deviceclasses"}}},
	}
	failed := map[schema.GroupVersion]error{{Group: "metrics.k8s.io", Version: "v1beta1"}: errors.New("service unavailable")}
	got := missingIn(lists, failed)
	want := []string{
		"DynamicResourceAllocation: deviceclasses (resource.k8s.io/v1) not served, so pods that claim devices are not placed there",
		"ResourceMetrics: pods (metrics.k8s.io/v1beta1) does not answer discovery, so kubectl top and HPAs in the primary see no usage of its delegates (install metrics-server)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("missing:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	lists = append(lists[:1], &metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "pods"}}})
	if got := missingIn(lists[1:], nil); !strings.Contains(strings.Join(got, "\n"), "InPlacePodResize: pods/resize (v1) not served") {
		t.Errorf("a cluster without pods/resize: %v", got)
	}
}
