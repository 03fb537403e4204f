package webhook

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

type podOpt func(*corev1.Pod)

func elected(opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo", Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func annotate(k, v string) podOpt { return func(p *corev1.Pod) { p.Annotations[k] = v } }
func cpu(q string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(q)
	}
}

func clusterOf(name string, ready bool, freeCPU string, nodeLabels map[string]string) ClusterView {
	return ClusterView{Name: name, Ready: ready, Reason: "ProbeFailed",
		Labels: map[string]string{flotillav1.LabelCluster: name, flotillav1.LabelRegion: "region-" + name},
		Nodes: []NodeView{{Name: name + "-n0", Labels: nodeLabels,
			Free: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(freeCPU), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("100")}}}}
}

var twoClusters = []ClusterView{
	clusterOf("eu", true, "4", map[string]string{"disk": "ssd"}),
	clusterOf("us", true, "1", map[string]string{"disk": "hdd"}),
}

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

func TestMutateChoosesFeasibleClusters(t *testing.T) {
	tests := map[string]struct {
		pod        *corev1.Pod
		clusters   []ClusterView
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
		"not ready cluster is skipped":  {pod: elected(), clusters: []ClusterView{clusterOf("eu", false, "4", nil), twoClusters[1]}, want: []string{"us"}},
		"waits for the cluster that is away, not the one it can never fit": {pod: elected(cpu("2")), clusters: []ClusterView{clusterOf("eu", false, "4", nil), clusterOf("us", true, "1", nil)},
			want: []string{"eu", "us"}, wantWaiting: true, wantWhy: "eu: not ready (ProbeFailed)"},
		"a cordoned virtual node takes nothing new": {pod: elected(), clusters: []ClusterView{func() ClusterView {
			c := clusterOf("eu", true, "4", nil)
			c.Cordoned = true
			return c
		}(), twoClusters[1]}, want: []string{"us"}},
		"a virtual node's untolerated taint takes nothing new": {pod: elected(), clusters: []ClusterView{func() ClusterView {
			c := clusterOf("eu", true, "4", nil)
			c.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
			return c
		}(), twoClusters[1]}, want: []string{"us"}},
		"every virtual node cordoned: waits for all": {pod: elected(), clusters: func() []ClusterView {
			a, b := clusterOf("eu", true, "4", nil), clusterOf("us", true, "4", nil)
			a.Cordoned, b.Cordoned = true, true
			return []ClusterView{a, b}
		}(), want: []string{"eu", "us"}, wantWaiting: true, wantWhy: "eu: its virtual node is cordoned; us: its virtual node is cordoned"},
		"every node of every cluster cordoned: waits": {pod: elected(), clusters: func() []ClusterView {
			a, b := clusterOf("eu", true, "4", nil), clusterOf("us", true, "4", nil)
			a.Nodes, b.Nodes = nil, nil
			return []ClusterView{a, b}
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
		"untolerated taint": {pod: elected(), clusters: []ClusterView{func() ClusterView {
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
		}), clusters: []ClusterView{clusterOf("eu", false, "4", nil), twoClusters[1]}, want: []string{"eu", "us"}},
		"tolerated taint": {pod: elected(func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
		}), clusters: []ClusterView{func() ClusterView {
			c := clusterOf("eu", true, "4", nil)
			c.Nodes[0].Taints = []corev1.Taint{{Key: "gpu", Value: "yes", Effect: corev1.TaintEffectNoSchedule}}
			return c
		}()}, want: []string{"eu"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := Mutate(tc.pod, tc.clusters, Options{})
			if tc.wantReject != "" {
				var rej *Rejection
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

func TestMutateMakesAProxyAndKeepsConstraintsForTheDelegate(t *testing.T) {
	pod := elected(func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		p.Spec.HostNetwork = true
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
		p.Spec.Tolerations = []corev1.Toleration{
			{Key: "dedicated", Operator: corev1.TolerationOpExists},
			{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
		}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone}}
	}, annotate(flotillav1.AnnotationFailoverSeconds, "30"))
	out, err := Mutate(pod, twoClusters, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Labels[flotillav1.LabelProxy] != "true" || !hasString(out.Finalizers, flotillav1.FinalizerDelegate) {
		t.Errorf("label %v finalizers %v", out.Labels, out.Finalizers)
	}
	if out.Spec.NodeSelector != nil || out.Spec.TopologySpreadConstraints != nil || out.Spec.HostNetwork || out.Spec.Containers[0].Ports[0].HostPort != 0 {
		t.Errorf("proxy keeps constraints or host networking: %+v", out.Spec)
	}
	if out.Spec.Containers[0].Ports[0].ContainerPort != 80 {
		t.Error("container port lost")
	}
	var c translate.Constraints
	if err := json.Unmarshal([]byte(out.Annotations[flotillav1.AnnotationDelegateConstraints]), &c); err != nil {
		t.Fatal(err)
	}
	if c.NodeSelector["disk"] != "ssd" || !c.HostNetwork || c.HostPorts["web/80/TCP"] != 8080 || len(c.TopologySpreadConstraints) != 1 {
		t.Errorf("constraints = %+v", c)
	}
	if len(c.Tolerations) != 1 || c.Tolerations[0].Key != "dedicated" {
		t.Errorf("delegate tolerations = %+v (the not-ready one belongs to the proxy)", c.Tolerations)
	}
	byKey := map[string]corev1.Toleration{}
	for _, tol := range out.Spec.Tolerations {
		byKey[tol.Key] = tol
	}
	if tol := byKey[corev1.TaintNodeNotReady]; tol.TolerationSeconds != nil || tol.Effect != corev1.TaintEffectNoExecute {
		t.Errorf("not-ready toleration = %+v, want NoExecute without seconds", tol)
	}
	if tol := byKey[flotillav1.TaintUnreachable]; tol.TolerationSeconds == nil || *tol.TolerationSeconds != 30 {
		t.Errorf("failover toleration = %+v", tol)
	}
	if _, ok := byKey[flotillav1.TaintVirtualNode]; !ok {
		t.Error("no virtual node toleration")
	}
	if _, ok := byKey["dedicated"]; ok {
		t.Error("the user's toleration stays on the proxy")
	}
	if pod.Labels != nil || pod.Spec.NodeSelector == nil {
		t.Error("the input pod was modified")
	}

	// A pod that arrives as a proxy was not made by the webhook: refused, never taken as it is.
	out.Spec.NodeName = ""
	var rej *Rejection
	if _, err := Mutate(out, twoClusters, Options{}); !errors.As(err, &rej) || !strings.Contains(rej.Message, "only Flotilla sets") {
		t.Errorf("a forged proxy: %v", err)
	}
}

func TestMutateLeavesOtherPodsAlone(t *testing.T) {
	plain := elected()
	delete(plain.Annotations, flotillav1.AnnotationElect)
	admiralty := elected()
	delete(admiralty.Annotations, flotillav1.AnnotationElect)
	admiralty.Annotations[flotillav1.AnnotationAdmiraltyElect] = ""
	delegate := elected()
	delegate.Labels = map[string]string{flotillav1.LabelPrimary: "someone"}
	for name, p := range map[string]*corev1.Pod{"not elected": plain, "admiralty off": admiralty, "a delegate": delegate} {
		out, err := Mutate(p, twoClusters, Options{})
		if err != nil || out != p {
			t.Errorf("%s: changed (%v)", name, err)
		}
	}
	out, err := Mutate(admiralty, twoClusters, Options{AcceptAdmiralty: true})
	if err != nil || out.Labels[flotillav1.LabelProxy] != "true" {
		t.Errorf("admiralty annotation with AcceptAdmiralty: %v", err)
	}
}

func TestMutateRejectsWhatCannotBeOffloaded(t *testing.T) {
	tests := map[string]struct {
		opt  podOpt
		want string
	}{
		"pvc": {func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}
		}, "volume data is a PersistentVolumeClaim"},
		"ephemeral": {func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}}
		}, "ephemeral volume"},
		"nodeName":  {func(p *corev1.Pod) { p.Spec.NodeName = "n1" }, "already bound to node n1"},
		"scheduler": {func(p *corev1.Pod) { p.Spec.SchedulerName = "volcano" }, "scheduler volcano"},
		"dra":       {func(p *corev1.Pod) { p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu"}} }, "DRA"},
		"failover":  {annotate(flotillav1.AnnotationFailoverSeconds, "soon"), "whole number of seconds"},
		// Secret references Flotilla does not copy would resolve to the secondary's own Secret.
		"csi secret": {func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
				Driver: "secrets-store", NodePublishSecretRef: &corev1.LocalObjectReference{Name: "db-root"}}}}}
		}, "volume v references a Secret in csi.nodePublishSecretRef, which Flotilla does not copy"},
		"cephfs secret": {func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{
				Monitors: []string{"m"}, SecretRef: &corev1.LocalObjectReference{Name: "s"}}}}}
		}, "cephfs.secretRef"},
		"rbd secret": {func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{
				CephMonitors: []string{"m"}, RBDImage: "i", SecretRef: &corev1.LocalObjectReference{Name: "s"}}}}}
		}, "rbd.secretRef"},
		"iscsi secret": {func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{
				TargetPortal: "t", IQN: "q", SecretRef: &corev1.LocalObjectReference{Name: "s"}}}}}
		}, "iscsi.secretRef"},
		"azureFile secret": {func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{AzureFile: &corev1.AzureFileVolumeSource{
				SecretName: "s", ShareName: "x"}}}}
		}, "azureFile.secretName"},
		"flexVolume secret": {func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{
				Driver: "d", SecretRef: &corev1.LocalObjectReference{Name: "s"}}}}}
		}, "flexVolume.secretRef"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Mutate(elected(tc.opt), twoClusters, Options{})
			var rej *Rejection
			if !errors.As(err, &rej) || !strings.Contains(rej.Message, tc.want) {
				t.Fatalf("err = %v, want a rejection containing %q", err, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
