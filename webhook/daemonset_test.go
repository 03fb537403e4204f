package webhook

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestExcludeVirtualNodesKeepsDaemonSetPodsOffVirtualNodesOnly(t *testing.T) {
	virtualNode := &corev1.Node{}
	virtualNode.Labels = map[string]string{flotillav1.LabelNodeType: flotillav1.NodeTypeVirtualKubelet, "zone": "a"}
	realNode := &corev1.Node{}
	realNode.Labels = map[string]string{"kubernetes.io/os": "linux", "zone": "a"}
	zoneA := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}
	zoneB := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}}
	withTerms := func(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	for _, tc := range []struct {
		name        string
		affinity    *corev1.Affinity
		wantChanged bool
		wantOnReal  bool
	}{
		{name: "no affinity (tolerate-all agent)", wantChanged: true, wantOnReal: true},
		{name: "empty node affinity", affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}, wantChanged: true, wantOnReal: true},
		{name: "one term keeps its own requirement", affinity: withTerms(zoneA), wantChanged: true, wantOnReal: true},
		{name: "every ORed term gets the exclusion", affinity: withTerms(zoneB, zoneA), wantChanged: true, wantOnReal: true},
		{name: "already excluded: idempotent", affinity: withTerms(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{flotillav1.VirtualNodeExclusion()}}), wantOnReal: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &corev1.PodSpec{Affinity: tc.affinity}
			if got := ExcludeVirtualNodes(spec); got != tc.wantChanged {
				t.Fatalf("changed = %v, want %v", got, tc.wantChanged)
			}
			if ExcludeVirtualNodes(spec) {
				t.Fatal("a second pass changed the spec again")
			}
			pod := &corev1.Pod{Spec: *spec}
			required := nodeaffinity.GetRequiredNodeAffinity(pod)
			if ok, _ := required.Match(virtualNode); ok {
				t.Error("the pod may still be placed on a virtual node")
			}
			if ok, _ := required.Match(realNode); ok != tc.wantOnReal {
				t.Errorf("placement on a real node in zone a = %v, want %v", ok, tc.wantOnReal)
			}
		})
	}
}

func TestConfigurationSendsOnlyChangedDaemonSetTemplatesAndIgnoresOutages(t *testing.T) {
	cfg := Configuration(ConfigOptions{URL: "https://127.0.0.1:9443"})
	if len(cfg.Webhooks) != 4 {
		t.Fatalf("webhooks = %d, want 4 (pods, DaemonSets, Replicators, Overrides)", len(cfg.Webhooks))
	}
	ds := cfg.Webhooks[1]
	if *ds.FailurePolicy != "Ignore" || *ds.ClientConfig.URL != "https://127.0.0.1:9443"+DaemonSetPath {
		t.Errorf("DaemonSet webhook: failurePolicy %s, url %s", *ds.FailurePolicy, *ds.ClientConfig.URL)
	}
	if len(ds.MatchConditions) != 1 || ds.MatchConditions[0].Expression == "" {
		t.Errorf("DaemonSet webhook has no template-changed condition: %+v", ds.MatchConditions)
	}
	if pods := cfg.Webhooks[0]; *pods.FailurePolicy != "Fail" || *pods.ClientConfig.URL != "https://127.0.0.1:9443"+Path {
		t.Errorf("pod webhook: failurePolicy %s, url %s", *pods.FailurePolicy, *pods.ClientConfig.URL)
	}
}
