package election

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// A proxy gated at admission fits, by the same judgement, the clusters that have since changed.
func TestRefitJudgesAGatedProxyAsAdmissionDid(t *testing.T) {
	gated, err := Mutate(t.Context(), elected(func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zz": "yes"} }), twoClusters, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(gated.Spec.SchedulingGates) != 1 {
		t.Fatalf("proxy not gated: %+v", gated.Spec.SchedulingGates)
	}
	feasible, why, err := placement.Refit(t.Context(), gated, twoClusters)
	if err != nil || len(feasible) != 0 || !strings.Contains(why, "does not match the pod's node selector") {
		t.Errorf("nothing changed: feasible %v, why %q, err %v", feasible, why, err)
	}
	relabelled := []placement.ClusterView{twoClusters[0], clusterOf("us", true, "1", map[string]string{"zz": "yes"})}
	feasible, why, err = placement.Refit(t.Context(), gated, relabelled)
	if err != nil || strings.Join(feasible, ",") != "us" || why != "" {
		t.Errorf("us relabelled: feasible %v, why %q, err %v; want us", feasible, why, err)
	}
	broken := gated.DeepCopy()
	broken.Annotations[flotillav1.AnnotationDelegateConstraints] = "{"
	if _, _, err := placement.Refit(t.Context(), broken, relabelled); err == nil || !strings.Contains(err.Error(), "does not parse") {
		t.Errorf("unparsable constraints: %v", err)
	}
}

func TestMutateChoosesFeasibleClusters(t *testing.T) {
	tests := map[string]struct {
		pod        *corev1.Pod
		clusters   []placement.ClusterView
		want       []string
		wantReject string
		// wantWaiting: no cluster fits now, the proxy waits for these, and wantWhy is in its
		// no-cluster-fits annotation.
		wantWaiting bool
		wantWhy     string
		// wantGated: no cluster can take it as things are; it waits unbound behind the placement gate.
		wantGated bool
	}{
		"every ready cluster with room": {pod: elected(), clusters: twoClusters, want: []string{"eu", "us"}},
		"too big for us":                {pod: elected(cpu("2")), clusters: twoClusters, want: []string{"eu"}},
		"too big for all, for now":      {pod: elected(cpu("64")), clusters: twoClusters, want: []string{"eu", "us"}, wantWaiting: true, wantWhy: "eu: node eu-n0 has only cpu 4 free of 64 requested"},
		"not ready cluster is skipped":  {pod: elected(), clusters: []placement.ClusterView{clusterOf("eu", false, "4", nil), twoClusters[1]}, want: []string{"us"}},
		"waits for the cluster that is away, not the one it can never fit": {pod: elected(cpu("2")), clusters: []placement.ClusterView{clusterOf("eu", false, "4", nil), clusterOf("us", true, "1", nil)},
			want: []string{"eu", "us"}, wantWaiting: true, wantWhy: "eu: not ready (ProbeFailed)"},
		"a cordoned virtual node takes nothing new": {pod: elected(), clusters: []placement.ClusterView{func() placement.ClusterView {
			c := clusterOf("eu", true, "4", nil)
			c.Cordoned = true
			return c
		}(), twoClusters[1]}, want: []string{"us"}},
		"a virtual node's untolerated taint takes nothing new": {pod: elected(), clusters: []placement.ClusterView{func() placement.ClusterView {
			c := clusterOf("eu", true, "4", nil)
			c.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
			return c
		}(), twoClusters[1]}, want: []string{"us"}},
		"every virtual node cordoned: waits for all": {pod: elected(), clusters: func() []placement.ClusterView {
			a, b := clusterOf("eu", true, "4", nil), clusterOf("us", true, "4", nil)
			a.Cordoned, b.Cordoned = true, true
			return []placement.ClusterView{a, b}
		}(), want: []string{"eu", "us"}, wantWaiting: true, wantWhy: "eu: its virtual node is cordoned; us: its virtual node is cordoned"},
		"every node of every cluster cordoned: waits": {pod: elected(), clusters: func() []placement.ClusterView {
			a, b := clusterOf("eu", true, "4", nil), clusterOf("us", true, "4", nil)
			a.Nodes, b.Nodes = nil, nil
			return []placement.ClusterView{a, b}
		}(), want: []string{"eu", "us"}, wantWaiting: true, wantWhy: "eu: no eligible node"},
		"selector matches no cluster":                {pod: elected(annotate(flotillav1.AnnotationClusterSelector, flotillav1.LabelRegion+"=region-mars")), clusters: twoClusters, wantReject: "matches no registered cluster"},
		"nodeSelector applies to nodes":              {pod: elected(func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "hdd"} }), clusters: twoClusters, want: []string{"us"}},
		"flotilla.dev/clusters restricts":            {pod: elected(annotate(flotillav1.AnnotationClusters, "us")), clusters: twoClusters, want: []string{"us"}},
		"unknown cluster is named":                   {pod: elected(annotate(flotillav1.AnnotationClusters, "us,mars")), clusters: twoClusters, wantReject: "unknown cluster(s) mars"},
		"cluster selector":                           {pod: elected(annotate(flotillav1.AnnotationClusterSelector, flotillav1.LabelRegion+"=region-eu")), clusters: twoClusters, want: []string{"eu"}},
		"bad cluster selector":                       {pod: elected(annotate(flotillav1.AnnotationClusterSelector, "a in (")), clusters: twoClusters, wantReject: "not a label selector"},
		"no clusters":                                {pod: elected(), clusters: nil, wantReject: "no secondary cluster is registered"},
		"weights restrict to the clusters they name": {pod: elected(annotate(flotillav1.AnnotationClusterWeights, "us=1")), clusters: twoClusters, want: []string{"us"}},
		"weight 0 takes none":                        {pod: elected(annotate(flotillav1.AnnotationClusterWeights, "eu=3, us=0")), clusters: twoClusters, want: []string{"eu"}},
		"weights name an unknown cluster":            {pod: elected(annotate(flotillav1.AnnotationClusterWeights, "eu=1,mars=2")), clusters: twoClusters, wantReject: "unknown cluster mars"},
		"malformed weight":                           {pod: elected(annotate(flotillav1.AnnotationClusterWeights, "eu=seventy")), clusters: twoClusters, wantReject: `"eu=seventy" is not <cluster>=<weight`},
		"weight out of range":                        {pod: elected(annotate(flotillav1.AnnotationClusterWeights, "eu=1001")), clusters: twoClusters, wantReject: "is not <cluster>=<weight 0-1000>"},
		"no positive weight":                         {pod: elected(annotate(flotillav1.AnnotationClusterWeights, "eu=0")), clusters: twoClusters, wantReject: "no cluster a positive weight"},
		"weights beside a spread over clusters": {pod: elected(annotate(flotillav1.AnnotationClusterWeights, "eu=1"), func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: flotillav1.LabelCluster, WhenUnsatisfiable: corev1.DoNotSchedule}}
		}), clusters: twoClusters, wantReject: "cannot be combined with a topologySpreadConstraint"},
		"untolerated taint": {pod: elected(), clusters: []placement.ClusterView{func() placement.ClusterView {
			c := clusterOf("eu", true, "4", nil)
			c.Nodes[0].Taints = []corev1.Taint{{Key: "gpu", Value: "yes", Effect: corev1.TaintEffectNoSchedule}}
			return c
		}()}, wantWaiting: true, wantGated: true, wantWhy: "has taint gpu=yes:NoSchedule the pod does not tolerate"},
		// Seen on the demo's bed: bound at once to a cluster whose nodes never matched, its
		// delegate Pending there for ever.
		"nodeSelector no node of any cluster matches: gated, bound nowhere": {pod: elected(func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"zz": "yes"}
		}), clusters: twoClusters, wantWaiting: true, wantGated: true, wantWhy: "does not match the pod's node selector"},
		"a spread left to the scheduler keeps the clusters that are only away": {pod: elected(func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: flotillav1.LabelCluster, WhenUnsatisfiable: corev1.DoNotSchedule}}
		}), clusters: []placement.ClusterView{clusterOf("eu", false, "4", nil), twoClusters[1]}, want: []string{"eu", "us"}},
		"tolerated taint": {pod: elected(func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
		}), clusters: []placement.ClusterView{func() placement.ClusterView {
			c := clusterOf("eu", true, "4", nil)
			c.Nodes[0].Taints = []corev1.Taint{{Key: "gpu", Value: "yes", Effect: corev1.TaintEffectNoSchedule}}
			return c
		}()}, want: []string{"eu"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := Mutate(t.Context(), tc.pod, tc.clusters, nil, Options{})
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
			got := feasibleOf(t, out)
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("feasible = %v, want %v", got, tc.want)
			}
			gated := len(out.Spec.SchedulingGates) == 1 && out.Spec.SchedulingGates[0].Name == flotillav1.SchedulingGatePlacement
			if gated != tc.wantGated {
				t.Errorf("scheduling gates %v, want the placement gate: %t", out.Spec.SchedulingGates, tc.wantGated)
			}
			why, waiting := out.Annotations[flotillav1.AnnotationNoClusterFits]
			if waiting != tc.wantWaiting || !strings.Contains(why, tc.wantWhy) {
				t.Errorf("no-cluster-fits annotation %q (set: %t), want set: %t containing %q", why, waiting, tc.wantWaiting, tc.wantWhy)
			}
		})
	}
}

func TestMutateBindsTheProxyToTheChosenFeasibleCluster(t *testing.T) {
	var seen []int64
	pickLast := func(w []int64) int { seen = w; return len(w) - 1 }
	gated := func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "wait"}} }
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		choose   func([]int64) int
		wantNode string
	}{
		{"bound to the chosen cluster", elected(), pickLast, flotillav1.VirtualNodeName("us")},
		{"only feasible clusters are offered", elected(cpu("2")), pickLast, flotillav1.VirtualNodeName("eu")},
		{"scheduler placement when Choose is unset", elected(), nil, ""},
		{"scheduling gates are left to the scheduler", elected(gated), pickLast, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Mutate(t.Context(), tc.pod, twoClusters, nil, Options{Choose: tc.choose})
			if err != nil {
				t.Fatal(err)
			}
			if out.Spec.NodeName != tc.wantNode {
				t.Errorf("nodeName %q, want %q", out.Spec.NodeName, tc.wantNode)
			}
			if got := feasibleOf(t, out); tc.wantNode != "" && !hasString(got, tc.wantNode[len(flotillav1.VirtualNodePrefix):]) {
				t.Errorf("bound outside its own affinity %v", got)
			}
		})
	}
	seen = nil
	if _, err := Mutate(t.Context(), elected(), twoClusters, nil, Options{Choose: pickLast}); err != nil {
		t.Fatal(err)
	}
	// eu has 4 CPUs free, us 1 (see clusterOf): weights follow free CPU.
	if len(seen) != 2 || seen[0] <= seen[1] || seen[1] < 1 {
		t.Errorf("weights %v, want eu's above us's and every weight at least 1", seen)
	}
}

func TestMutatePlacesAmongTheClustersWithFewestSiblings(t *testing.T) {
	withSiblings := func(eu, us int) []placement.ClusterView {
		out := []placement.ClusterView{twoClusters[0], twoClusters[1]}
		out[0].Siblings, out[1].Siblings = eu, us
		return out
	}
	pickFirst := func([]int64) int { return 0 }
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		clusters []placement.ClusterView
		wantNode string
	}{
		{"fewer siblings beats more free CPU", elected(), withSiblings(2, 1), "us"},
		{"a tie leaves the choice to capacity", elected(), withSiblings(1, 1), "eu"},
		{"no siblings anywhere: capacity", elected(), withSiblings(0, 0), "eu"},
		{"an infeasible cluster is never chosen for its few siblings", elected(cpu("2")), withSiblings(5, 0), "eu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Mutate(t.Context(), tc.pod, tc.clusters, nil, Options{Choose: pickFirst})
			if err != nil {
				t.Fatal(err)
			}
			if want := flotillav1.VirtualNodeName(tc.wantNode); out.Spec.NodeName != want {
				t.Errorf("nodeName %q, want %q", out.Spec.NodeName, want)
			}
		})
	}
}

// A spread over clusters stays on the proxy for the primary's scheduler (which then binds it);
// one inside the secondary (zone, hostname) is the delegate's, and the webhook binds the proxy.
func TestSpreadConstraintsGoWhereTheirKeyIs(t *testing.T) {
	overClusters := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: flotillav1.LabelCluster, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	overZones := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway}
	choose := Options{Choose: func([]int64) int { return 0 }}

	pod := elected(func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{overClusters, overZones}
	})
	out, err := Mutate(t.Context(), pod, twoClusters, nil, choose)
	if err != nil {
		t.Fatal(err)
	}
	if out.Spec.NodeName != "" {
		t.Errorf("bound to %s: a spread over clusters is the primary scheduler's to apply", out.Spec.NodeName)
	}
	if len(out.Spec.TopologySpreadConstraints) != 1 || out.Spec.TopologySpreadConstraints[0].TopologyKey != flotillav1.LabelCluster {
		t.Errorf("proxy's constraints %+v, want the one over clusters", out.Spec.TopologySpreadConstraints)
	}
	var c translate.Constraints
	if err := json.Unmarshal([]byte(out.Annotations[flotillav1.AnnotationDelegateConstraints]), &c); err != nil {
		t.Fatal(err)
	}
	if len(c.TopologySpreadConstraints) != 1 || c.TopologySpreadConstraints[0].TopologyKey != corev1.LabelTopologyZone {
		t.Errorf("delegate's constraints %+v, want the one over zones", c.TopologySpreadConstraints)
	}

	zonesOnly := elected(func(p *corev1.Pod) { p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{overZones} })
	out, err = Mutate(t.Context(), zonesOnly, twoClusters, nil, choose)
	if err != nil {
		t.Fatal(err)
	}
	if out.Spec.NodeName == "" || len(out.Spec.TopologySpreadConstraints) != 0 {
		t.Errorf("node %q, proxy constraints %+v: want bound, none", out.Spec.NodeName, out.Spec.TopologySpreadConstraints)
	}
}

// In a namespace with a FleetQuota the proxy waits behind the quota gate, annotated waiting (under
// the seal), and is not bound at admission; elsewhere a quota gate or annotation it arrived with is
// not kept.
func TestMutateGatesThePodsOfANamespaceWithAQuota(t *testing.T) {
	pickLast := func(w []int64) int { return len(w) - 1 }
	out, err := Mutate(t.Context(), elected(), twoClusters, nil, Options{Choose: pickLast, QuotaGate: true})
	if err != nil {
		t.Fatal(err)
	}
	if out.Spec.NodeName != "" || !slices.ContainsFunc(out.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == flotillav1.SchedulingGateQuota }) ||
		out.Annotations[flotillav1.AnnotationQuota] != flotillav1.QuotaWaiting || len(feasibleOf(t, out)) != 2 {
		t.Errorf("a proxy of a namespace with a quota: node %q, gates %v, annotations %v", out.Spec.NodeName, out.Spec.SchedulingGates, out.Annotations)
	}
	forged := elected(func(p *corev1.Pod) {
		p.Annotations[flotillav1.AnnotationQuota] = flotillav1.QuotaAdmitted
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: flotillav1.SchedulingGateQuota}}
	})
	out, err = Mutate(t.Context(), forged, twoClusters, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out.Annotations[flotillav1.AnnotationQuota]; ok || len(out.Spec.SchedulingGates) != 0 {
		t.Errorf("kept what only Flotilla sets: %v, %v", out.Annotations, out.Spec.SchedulingGates)
	}
}
