package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/clusters/views"
)

type registered []clusters.Snapshot

func (r registered) Snapshots() []clusters.Snapshot { return r }

// A Replicator that names a cluster outside the cluster sets bound to its replication namespace
// is refused at admission, naming the cluster and the sets; "*" and the clusters it may use are
// admitted.
func TestReplicatorNamingAClusterOutsideItsSetsIsRefused(t *testing.T) {
	scheme := clusters.NewScheme()
	fleet := registered{
		{Name: "secondary1", Role: clusters.RoleSecondary, ID: "s1", Status: flotillav1.ClusterRunning, CapacitySynced: true},
		{Name: "secondary2", Role: clusters.RoleSecondary, ID: "s2", Status: flotillav1.ClusterRunning, CapacitySynced: true},
	}
	sets := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&flotillav1.ClusterSet{ObjectMeta: metav1.ObjectMeta{Name: "first"}, Spec: flotillav1.ClusterSetSpec{Clusters: []string{"secondary1"}}},
		&flotillav1.ClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "first"}, Spec: flotillav1.ClusterSetBindingSpec{ClusterSet: "first"}},
	).Build()
	// The API server's answer to every SubjectAccessReview: allowed (this test is about targets).
	reviews := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			obj.(*authorizationv1.SubjectAccessReview).Status.Allowed = true
			return nil
		}}).Build()
	h := &ReplicatorHandler{Decoder: admission.NewDecoder(scheme), Reviews: reviews, Namespaces: sets,
		Clusters: fleet, Tenancy: &views.Gatherer{Registry: fleet, Tenancy: sets}}
	admit := func(replicationNamespace string, targets ...string) admission.Response {
		rep := &flotillav1.Replicator{TypeMeta: metav1.TypeMeta{APIVersion: flotillav1.GroupVersion.String(), Kind: "Replicator"},
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec:       flotillav1.ReplicatorSpec{ReplicationNamespace: replicationNamespace, TargetCluster: targets, ConfigMapName: "web"}}
		raw, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		return h.Handle(t.Context(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Name: "web", Object: runtime.RawExtension{Raw: raw}}})
	}
	for _, tc := range []struct {
		name, replicationNamespace string
		targets                    []string
		refusal                    string
	}{
		{"a cluster of its set", "team-a", []string{"secondary1"}, ""},
		{"a cluster outside its set", "team-a", []string{"secondary1", "secondary2"},
			"Replicator web: targetCluster names cluster(s) its replicationNamespace may not use: secondary2: not in the ClusterSets bound to namespace team-a (first)"},
		{"every cluster it may use", "team-a", []string{"*"}, ""},
		{"an unbound namespace", "team-b", []string{"secondary2"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := admit(tc.replicationNamespace, tc.targets...)
			switch {
			case tc.refusal == "" && !resp.Allowed:
				t.Errorf("refused: %s", resp.Result.Message)
			case tc.refusal != "" && (resp.Allowed || !strings.Contains(resp.Result.Message, tc.refusal)):
				t.Errorf("allowed %v, %q; want refused with %q", resp.Allowed, resp.Result.Message, tc.refusal)
			}
		})
	}
}
