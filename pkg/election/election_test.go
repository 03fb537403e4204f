package election

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

func TestMutateMakesAProxyAndKeepsConstraintsForTheDelegate(t *testing.T) {
	pod := elected(func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		p.Spec.HostNetwork = true
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
		p.Spec.Tolerations = []corev1.Toleration{
			{Key: "dedicated", Operator: corev1.TolerationOpExists},
			{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))},
		}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone}}
	}, annotate(flotillav1.AnnotationFailoverSeconds, "30"))
	out, err := Mutate(t.Context(), pod, twoClusters, nil, Options{})
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
	var rej *placement.Rejection
	if _, err := Mutate(t.Context(), out, twoClusters, nil, Options{}); !errors.As(err, &rej) || !strings.Contains(rej.Message, "only Flotilla sets") {
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
		out, err := Mutate(t.Context(), p, twoClusters, nil, Options{})
		if err != nil || out != p {
			t.Errorf("%s: changed (%v)", name, err)
		}
	}
	out, err := Mutate(t.Context(), admiralty, twoClusters, nil, Options{AcceptAdmiralty: true})
	if err != nil || out.Labels[flotillav1.LabelProxy] != "true" {
		t.Errorf("admiralty annotation with AcceptAdmiralty: %v", err)
	}
}

func TestMutateRejectsWhatCannotBeOffloaded(t *testing.T) {
	tests := map[string]struct {
		opt  podOpt
		want string
	}{
		"ephemeral": {func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}}
		}, "ephemeral volume"},
		"nodeName":  {func(p *corev1.Pod) { p.Spec.NodeName = "n1" }, "already bound to node n1"},
		"scheduler": {func(p *corev1.Pod) { p.Spec.SchedulerName = "volcano" }, "scheduler volcano"},
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
			_, err := Mutate(t.Context(), elected(tc.opt), twoClusters, nil, Options{})
			var rej *placement.Rejection
			if !errors.As(err, &rej) || !strings.Contains(rej.Message, tc.want) {
				t.Fatalf("err = %v, want a rejection containing %q", err, tc.want)
			}
		})
	}
}
