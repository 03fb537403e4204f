package dependency

import (
	"testing"
	"time"

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
