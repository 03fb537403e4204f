package placement_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/placement/placementtest"
)

// Every reason placement refuses an elected pod for, each a *Rejection whose message says why.
func TestEveryRejection(t *testing.T) {
	a := placementtest.Annotate
	elected := placementtest.Elected
	overClusters := func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: flotillav1.LabelCluster, WhenUnsatisfiable: corev1.DoNotSchedule}}
	}
	decide := func(p *corev1.Pod, clusters []placement.ClusterView) error {
		_, err := placement.Decide(t.Context(), p, placement.DelegateConstraints(p), clusters, nil)
		return err
	}
	claims := func(views map[string]placement.ClaimView) func(*corev1.Pod) error {
		return func(p *corev1.Pod) error {
			_, _, err := placement.DataCluster(p, views)
			return err
		}
	}
	remote := flotillav1.StorageClassRemote
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		judge func(*corev1.Pod) error
		want  string
	}{
		{"no cluster registered", elected(), func(p *corev1.Pod) error { return decide(p, nil) }, "no secondary cluster is registered"},
		{"a selector that matches no cluster", elected(a(flotillav1.AnnotationClusterSelector, flotillav1.LabelRegion+"=region-mars")),
			func(p *corev1.Pod) error { return decide(p, twoClusters) }, "matches no registered cluster"},
		{"a selector that does not parse", elected(a(flotillav1.AnnotationClusterSelector, "a in (")),
			func(p *corev1.Pod) error { return decide(p, twoClusters) }, "is not a label selector"},
		{"an unknown cluster named", elected(a(flotillav1.AnnotationClusters, "eu,mars")),
			func(p *corev1.Pod) error { return decide(p, twoClusters) }, "names unknown cluster(s) mars"},
		{"weights that do not parse", elected(a(flotillav1.AnnotationClusterWeights, "eu:3")),
			func(p *corev1.Pod) error { return decide(p, twoClusters) }, "is not <cluster>=<weight"},
		{"weights of an unknown cluster", elected(a(flotillav1.AnnotationClusterWeights, "mars=1")),
			func(p *corev1.Pod) error { return decide(p, twoClusters) }, "names unknown cluster mars"},
		{"no positive weight", elected(a(flotillav1.AnnotationClusterWeights, "eu=0,us=0")),
			func(p *corev1.Pod) error { return decide(p, twoClusters) }, "gives no cluster a positive weight"},
		{"weights beside a spread over clusters", elected(a(flotillav1.AnnotationClusterWeights, "eu=1"), overClusters),
			func(p *corev1.Pod) error { return decide(p, twoClusters) }, "cannot be combined with a topologySpreadConstraint"},
		{"a failover bound that is not seconds", elected(a(flotillav1.AnnotationFailoverSeconds, "soon")),
			func(p *corev1.Pod) error { _, err := placement.FailoverSeconds(p); return err }, "must be a whole number of seconds"},
		{"an unknown on-volume-cluster-loss", elected(a(flotillav1.AnnotationOnVolumeClusterLoss, "later")),
			placement.CheckOnVolumeClusterLoss, "must be wait"},
		{"recreate beside at-most-once", elected(a(flotillav1.AnnotationOnVolumeClusterLoss, flotillav1.OnVolumeClusterLossRecreate), a(flotillav1.AnnotationAtMostOnce, "")),
			placement.CheckOnVolumeClusterLoss, "contradict each other"},
		{"a claim of another class", elected(placementtest.WithClaims("data")),
			claims(map[string]placement.ClaimView{"data": {Found: true, Class: "standard"}}), "whose data stays in this cluster"},
		{"claims whose data is in two clusters", elected(placementtest.WithClaims("a", "b")),
			claims(map[string]placement.ClaimView{"a": {Found: true, Class: remote, Cluster: "eu"}, "b": {Found: true, Class: remote, Cluster: "us"}}),
			"a pod runs in one cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rej *placement.Rejection
			if err := tc.judge(tc.pod); !errors.As(err, &rej) || !strings.Contains(rej.Message, tc.want) {
				t.Fatalf("err = %v, want a rejection saying %q", err, tc.want)
			}
		})
	}
}
