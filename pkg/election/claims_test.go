package election

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

// The data decides the cluster: a claim of class flotilla bound in a cluster keeps its pod there,
// waiting while that cluster cannot take it; a claim of another class stays in the primary.
func TestMutateClaims(t *testing.T) {
	remote := func(cluster string) placement.ClaimView {
		return placement.ClaimView{Found: true, Class: flotillav1.StorageClassRemote, Cluster: cluster}
	}
	euAway := []placement.ClusterView{clusterOf("eu", false, "4", nil), clusterOf("us", true, "1", nil)}
	tests := map[string]struct {
		claims       map[string]placement.ClaimView
		clusters     []placement.ClusterView
		pod          *corev1.Pod
		wantReject   string
		wantFeasible []string
		wantNoFit    string // in the flotilla.dev/no-cluster-fits annotation
		wantGated    bool
	}{
		"a claim of another class stays in the primary": {
			claims: map[string]placement.ClaimView{"data": {Found: true, Class: "standard"}}, clusters: twoClusters, pod: elected(withClaims("data")),
			wantReject: `volume v-data uses claim data of storage class "standard", whose data stays in this cluster`,
		},
		"a claim with no class is another class": {
			claims: map[string]placement.ClaimView{"data": {Found: true}}, clusters: twoClusters, pod: elected(withClaims("data")),
			wantReject: `storage class ""`,
		},
		"a claim not created yet: anywhere": {
			claims: map[string]placement.ClaimView{"data": {}}, clusters: twoClusters, pod: elected(withClaims("data")),
			wantFeasible: []string{"eu", "us"},
		},
		"an unbound flotilla claim: anywhere": {
			claims: map[string]placement.ClaimView{"data": remote("")}, clusters: twoClusters, pod: elected(withClaims("data")),
			wantFeasible: []string{"eu", "us"},
		},
		"a bound flotilla claim: its cluster only": {
			claims: map[string]placement.ClaimView{"data": remote("us")}, clusters: twoClusters, pod: elected(withClaims("data")),
			wantFeasible: []string{"us"},
		},
		"its cluster away: the pod waits for it, never elsewhere": {
			claims: map[string]placement.ClaimView{"data": remote("eu")}, clusters: euAway, pod: elected(withClaims("data")),
			wantFeasible: []string{"eu"}, wantNoFit: "the data of claim data is in cluster eu, which cannot take it now: eu: not ready",
		},
		"its cluster gone from the registration: gated, with the reason": {
			claims: map[string]placement.ClaimView{"data": remote("asia")}, clusters: twoClusters, pod: elected(withClaims("data")),
			wantGated: true, wantNoFit: "the data of claim data is in cluster asia, which is not registered",
		},
		"its cluster excluded by the pod's own clusters annotation: gated": {
			claims: map[string]placement.ClaimView{"data": remote("eu")}, clusters: twoClusters,
			pod:       elected(withClaims("data"), annotate(flotillav1.AnnotationClusters, "us")),
			wantGated: true, wantNoFit: "not among the clusters this pod may go to",
		},
		"two claims in two clusters: refused": {
			claims: map[string]placement.ClaimView{"a": remote("eu"), "b": remote("us")}, clusters: twoClusters, pod: elected(withClaims("a", "b")),
			wantReject: "the data of claim a is in cluster eu and that of claim b in cluster us",
		},
		"a cluster whose registration takes no claims: the others": {
			claims: map[string]placement.ClaimView{"data": remote("")}, clusters: []placement.ClusterView{noClaims(clusterOf("eu", true, "4", nil)), clusterOf("us", true, "1", nil)},
			pod: elected(withClaims("data")), wantFeasible: []string{"us"},
		},
		"no cluster takes claims: gated, naming each": {
			claims: map[string]placement.ClaimView{"data": remote("")}, clusters: []placement.ClusterView{noClaims(clusterOf("eu", true, "4", nil))},
			pod: elected(withClaims("data")), wantGated: true, wantNoFit: "eu: it takes no claims of class flotilla (storage class none in its registration)",
		},
		"a pod without claims goes there still": {
			clusters: []placement.ClusterView{noClaims(clusterOf("eu", true, "4", nil))}, pod: elected(), wantFeasible: []string{"eu"},
		},
		"recreate, its cluster away for less than the failover bound: it waits, and says when it leaves": {
			claims: map[string]placement.ClaimView{"data": remote("eu")}, clusters: []placement.ClusterView{lostFor(clusterOf("eu", false, "4", nil), 299*time.Second), clusterOf("us", true, "1", nil)},
			pod:          elected(withClaims("data"), annotate(flotillav1.AnnotationOnVolumeClusterLoss, flotillav1.OnVolumeClusterLossRecreate)),
			wantFeasible: []string{"eu"}, wantNoFit: "once that cluster has been unreachable for its failover bound",
		},
		"recreate, its cluster away for the failover bound: elsewhere, never there": {
			claims: map[string]placement.ClaimView{"data": remote("eu")}, clusters: []placement.ClusterView{lostFor(clusterOf("eu", false, "4", nil), 300*time.Second), clusterOf("us", true, "1", nil)},
			pod:          elected(withClaims("data"), annotate(flotillav1.AnnotationOnVolumeClusterLoss, flotillav1.OnVolumeClusterLossRecreate)),
			wantFeasible: []string{"us"},
		},
		"recreate with its own failover bound": {
			claims: map[string]placement.ClaimView{"data": remote("eu")}, clusters: []placement.ClusterView{lostFor(clusterOf("eu", false, "4", nil), 30*time.Second), clusterOf("us", true, "1", nil)},
			pod: elected(withClaims("data"), annotate(flotillav1.AnnotationOnVolumeClusterLoss, flotillav1.OnVolumeClusterLossRecreate),
				annotate(flotillav1.AnnotationFailoverSeconds, "30")),
			wantFeasible: []string{"us"},
		},
		"recreate, its cluster drained (cordoned and marked): elsewhere at once": {
			claims: map[string]placement.ClaimView{"data": remote("eu")}, clusters: []placement.ClusterView{draining(cordoned(clusterOf("eu", true, "4", nil))), clusterOf("us", true, "1", nil)},
			pod:          elected(withClaims("data"), annotate(flotillav1.AnnotationOnVolumeClusterLoss, flotillav1.OnVolumeClusterLossRecreate)),
			wantFeasible: []string{"us"},
		},
		"no recreate, its cluster drained: it waits for that cluster": {
			claims: map[string]placement.ClaimView{"data": remote("eu")}, clusters: []placement.ClusterView{draining(cordoned(clusterOf("eu", true, "4", nil))), clusterOf("us", true, "1", nil)},
			pod:          elected(withClaims("data")),
			wantFeasible: []string{"eu"}, wantNoFit: "the data of claim data is in cluster eu",
		},
		"no recreate: its cluster lost for an hour, it still waits": {
			claims: map[string]placement.ClaimView{"data": remote("eu")}, clusters: []placement.ClusterView{lostFor(clusterOf("eu", false, "4", nil), time.Hour), clusterOf("us", true, "1", nil)},
			pod:          elected(withClaims("data"), annotate(flotillav1.AnnotationOnVolumeClusterLoss, flotillav1.OnVolumeClusterLossWait)),
			wantFeasible: []string{"eu"}, wantNoFit: "the data of claim data is in cluster eu",
		},
		"recreate and at-most-once contradict: refused": {
			claims: map[string]placement.ClaimView{"data": remote("eu")}, clusters: twoClusters,
			pod: elected(withClaims("data"), annotate(flotillav1.AnnotationOnVolumeClusterLoss, flotillav1.OnVolumeClusterLossRecreate),
				annotate(flotillav1.AnnotationAtMostOnce, "")),
			wantReject: "contradict each other",
		},
		"an unknown loss policy: refused, naming both": {
			claims: map[string]placement.ClaimView{"data": remote("eu")}, clusters: twoClusters,
			pod:        elected(withClaims("data"), annotate(flotillav1.AnnotationOnVolumeClusterLoss, "Recreate")),
			wantReject: `must be wait (the default: wait for the cluster that holds the data) or recreate`,
		},
		"two claims, one bound: the bound one decides": {
			claims: map[string]placement.ClaimView{"a": remote(""), "b": remote("us")}, clusters: twoClusters, pod: elected(withClaims("a", "b")),
			wantFeasible: []string{"us"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := Mutate(t.Context(), tc.pod, tc.clusters, tc.claims, Options{})
			if tc.wantReject != "" {
				var rej *placement.Rejection
				if !errors.As(err, &rej) || !strings.Contains(rej.Message, tc.wantReject) {
					t.Fatalf("err = %v, want a rejection containing %q", err, tc.wantReject)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gated := slices.ContainsFunc(out.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == flotillav1.SchedulingGatePlacement })
			if gated != tc.wantGated {
				t.Errorf("gated = %v, want %v", gated, tc.wantGated)
			}
			if !tc.wantGated {
				if got := feasibleOf(t, out); !slices.Equal(got, tc.wantFeasible) {
					t.Errorf("clusters = %v, want %v", got, tc.wantFeasible)
				}
			}
			if noFit := out.Annotations[flotillav1.AnnotationNoClusterFits]; !strings.Contains(noFit, tc.wantNoFit) || (tc.wantNoFit == "") != (noFit == "") {
				t.Errorf("%s = %q, want it to hold %q", flotillav1.AnnotationNoClusterFits, noFit, tc.wantNoFit)
			}
		})
	}
}

// A gated proxy whose data is in an away cluster is refitted only to that cluster.
func TestRefitKeepsTheDataCluster(t *testing.T) {
	pod := elected(withClaims("data"))
	out, err := Mutate(t.Context(), pod, twoClusters, map[string]placement.ClaimView{"data": {Found: true, Class: flotillav1.StorageClassRemote, Cluster: "us"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	feasible, _, err := placement.Refit(t.Context(), out, twoClusters)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(feasible, []string{"us"}) {
		t.Errorf("Refit = %v, want [us]", feasible)
	}
}
