package cli

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

func object(apiVersion, kind, name string, labels map[string]string, owned bool) unstructured.Unstructured {
	var u unstructured.Unstructured
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetName(name)
	u.SetLabels(labels)
	if owned {
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: "u1"}})
	}
	return u
}

func TestForeignNamesOnlyWhatIsNotFlotillas(t *testing.T) {
	ours := map[string]string{flotillav1.LabelPrimary: "p1"}
	for _, tc := range []struct {
		name string
		objs []unstructured.Unstructured
		want string
	}{
		{"what every namespace holds, and ours", []unstructured.Unstructured{
			object("v1", "ServiceAccount", "default", nil, false),
			object("v1", "ConfigMap", "kube-root-ca.crt", nil, false),
			object("v1", "Pod", "web-1", ours, false),
			object("discovery.k8s.io/v1", "EndpointSlice", "web-abc", nil, true),
			object("v1", "Event", "web-1.123", nil, false),
		}, ""},
		{"another primary's pod is not ours", []unstructured.Unstructured{
			object("v1", "Pod", "theirs", map[string]string{flotillav1.LabelPrimary: "p2"}, false),
		}, "pod theirs"},
		{"an admin's ConfigMap and a second ServiceAccount", []unstructured.Unstructured{
			object("v1", "ConfigMap", "settings", nil, false),
			object("v1", "ServiceAccount", "robot", nil, false),
			object("apps/v1", "Deployment", "mine", ours, false),
		}, "configmap settings, serviceaccount robot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(foreign(tc.objs, "p1"), ", "); got != tc.want {
				t.Errorf("foreign = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCreatedByFlotillaIsNotMerelyOpenedToIt(t *testing.T) {
	ns := func(labels, annotations map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels, Annotations: annotations}}
	}
	managed := map[string]string{flotillav1.LabelManagedBy: "p1"}
	for _, tc := range []struct {
		name string
		ns   *corev1.Namespace
		want bool
	}{
		{"created for a delegate", ns(map[string]string{flotillav1.LabelManagedBy: "p1", flotillav1.LabelPrimary: "p1"}, nil), true},
		{"created by a Replicator", ns(map[string]string{flotillav1.LabelManagedBy: "p1", flotillav1.LabelPrimary: "p1"},
			map[string]string{flotillav1.AnnotationCreatedBy: "p1/uid"}), true},
		{"opened by an admin's label", ns(managed, nil), false},
		{"another primary's", ns(map[string]string{flotillav1.LabelManagedBy: "p2", flotillav1.LabelPrimary: "p2"}, nil), false},
		{"another primary's Replicator", ns(managed, map[string]string{flotillav1.AnnotationCreatedBy: "p2/uid"}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := clusters.CreatedByFlotilla(tc.ns, "p1"); got != tc.want {
				t.Errorf("CreatedByFlotilla = %t, want %t", got, tc.want)
			}
		})
	}
}

// A namespace that holds only what an aggregated API shows of its pods (metrics.k8s.io's
// podmetrics: get and list only) holds nothing of a user's: seen keeping test-ns in a secondary.
func TestUserResourcesLeaveOutReadOnlyViews(t *testing.T) {
	got := userResources([]*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", Namespaced: true, Verbs: metav1.Verbs{"create", "delete", "get", "list"}},
			{Name: "pods/log", Namespaced: true, Verbs: metav1.Verbs{"get"}},
		}},
		{GroupVersion: "metrics.k8s.io/v1beta1", APIResources: []metav1.APIResource{
			{Name: "pods", Namespaced: true, Verbs: metav1.Verbs{"get", "list"}},
		}},
	})
	if len(got) != 1 || got[0].Resource != "configmaps" {
		t.Fatalf("listed %v", got)
	}
}
