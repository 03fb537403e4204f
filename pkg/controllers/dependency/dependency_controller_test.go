package dependency

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	metadatafake "k8s.io/client-go/metadata/fake"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// knownClusters is a registry that knows some clusters, none of them answering.
type knownClusters map[string]bool

func (k knownClusters) Secondary(name string) (clusters.Secondary, bool) {
	return clusters.Secondary{}, k[name]
}

func (knownClusters) PrimaryID() string { return "primary-id" }

func TestReconcileForgetsCopiesOfRemovedClusters(t *testing.T) {
	removed := Key{Cluster: "gone", Kind: translate.KindSecret, Namespace: "ns", Name: "s"}
	detached := Key{Cluster: "detached", Kind: translate.KindSecret, Namespace: "ns", Name: "s"}
	r := &Reconciler{Secondaries: knownClusters{"detached": true}}
	for _, k := range []Key{removed, detached} {
		r.applied = map[Key]string{removed: "1", detached: "1"}
		r.written = map[Key]string{removed: "7", detached: "7"}
		r.unusedSince = map[Key]time.Time{removed: time.Now(), detached: time.Now()}
		res, err := r.Reconcile(t.Context(), k)
		if err != nil {
			t.Fatal(err)
		}
		_, kept := r.written[k]
		switch k {
		case removed:
			if kept || res != (ctrl.Result{}) {
				t.Errorf("a removed cluster's copy: remembered %v, result %+v; want forgotten, no requeue", kept, res)
			}
			if _, other := r.written[detached]; !other {
				t.Error("another cluster's copy was forgotten too")
			}
		case detached:
			if !kept || res.RequeueAfter == 0 {
				t.Errorf("a known cluster that does not answer: remembered %v, result %+v; want kept and requeued", kept, res)
			}
		}
	}
}

// The manager's cache of every ConfigMap's and Secret's metadata keeps no annotation: kubectl's
// last-applied-configuration of a Secret is its data in clear.
func TestMetadataOnlyKeyKeepsNoSecretContent(t *testing.T) {
	in := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-root", UID: "u", ResourceVersion: "7",
		Labels:        map[string]string{"app": "db"},
		Annotations:   map[string]string{corev1.LastAppliedConfigAnnotation: `{"data":{"password":"c2VjcmV0"}}`},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	out, err := MetadataOnlyKey(in)
	if err != nil {
		t.Fatal(err)
	}
	m := out.(*metav1.PartialObjectMetadata)
	if m.Annotations != nil || m.Labels != nil || m.ManagedFields != nil {
		t.Fatalf("kept %+v", m.ObjectMeta)
	}
	if m.Namespace != "shop" || m.Name != "db-root" || m.UID != "u" || m.ResourceVersion != "7" {
		t.Fatalf("lost what the reconciler reads: %+v", m.ObjectMeta)
	}
}

// The watch's own store, fed by a metadata client, keeps no annotation of a Secret.
func TestMetadataWatchStoresNoAnnotations(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	secret := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-root", ResourceVersion: "7",
			Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: `{"data":{"password":"c2VjcmV0"}}`}}}
	w := NewMetadataWatch(metadatafake.NewSimpleMetadataClient(scheme, secret))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = w.Start(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		obj, ok, _ := w.inform[translate.KindSecret].GetIndexer().GetByKey("shop/db-root")
		if ok {
			if a := obj.(*metav1.PartialObjectMetadata).Annotations; len(a) > 0 {
				t.Fatalf("the cache keeps the Secret's annotations: %v", a)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the Secret never reached the watch's store")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
