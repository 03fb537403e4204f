package election

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement/placementtest"
)

// Builders of the pods and cluster views the webhook's table tests start from.

type podOpt = placementtest.PodOpt

var (
	elected    = placementtest.Elected
	annotate   = placementtest.Annotate
	cpu        = placementtest.CPU
	clusterOf  = placementtest.ClusterOf
	withClaims = placementtest.WithClaims
	cordoned   = placementtest.Cordoned
	noClaims   = placementtest.NoClaims
	lostFor    = placementtest.LostFor
	draining   = placementtest.Draining
)

var twoClusters = placementtest.TwoClusters()

func feasibleOf(t *testing.T, p *corev1.Pod) []string {
	t.Helper()
	if p.Spec.Affinity == nil {
		return nil
	}
	terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 || terms[0].MatchExpressions[0].Key != flotillav1.LabelCluster {
		t.Fatalf("proxy affinity = %+v", terms)
	}
	return terms[0].MatchExpressions[0].Values
}
