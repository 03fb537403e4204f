package clusterdetector

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/tunnel"
)

func TestSetStatus(t *testing.T) {
	exp := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	running := clusters.Snapshot{Name: "eu", Entry: clusters.Entry{Context: "eu-ctx", Cluster: "c", User: "u"},
		Role: clusters.RoleSecondary, ID: "uid", Status: flotillav1.ClusterRunning, Version: "v1.35.4",
		LastProbe: exp, TokenExpiry: &exp, CapacitySynced: true,
		Capacity: clusters.Capacity{NodeCount: 3, Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}}}
	tests := map[string]struct {
		in             StatusInput
		wantStatus     flotillav1.ClusterStatus
		wantReady      metav1.ConditionStatus
		wantRegistered string
		wantNode       string
		wantValid      metav1.ConditionStatus // "" when absent
	}{
		"running secondary": {in: StatusInput{Snapshot: running}, wantStatus: flotillav1.ClusterRunning,
			wantReady: metav1.ConditionTrue, wantRegistered: flotillav1.ReasonRegistered, wantNode: "flotilla-eu"},
		"unreachable secondary keeps its node": {in: StatusInput{Snapshot: func() clusters.Snapshot {
			s := running
			s.Status, s.Reason, s.Message = flotillav1.ClusterUnknown, flotillav1.ReasonProbeFailed, "timeout"
			return s
		}()}, wantStatus: flotillav1.ClusterUnknown, wantReady: metav1.ConditionFalse, wantRegistered: flotillav1.ReasonRegistered, wantNode: "flotilla-eu"},
		"duplicate": {in: StatusInput{Snapshot: func() clusters.Snapshot {
			s := running
			s.Status, s.Reason, s.Message = flotillav1.ClusterUnknown, flotillav1.ReasonDuplicateCluster, "same as x"
			return s
		}()}, wantStatus: flotillav1.ClusterUnknown, wantReady: metav1.ConditionFalse, wantRegistered: flotillav1.ReasonDuplicateCluster},
		"identity changed keeps its node and pinned ID": {in: StatusInput{Snapshot: func() clusters.Snapshot {
			s := running
			s.Status, s.Reason, s.Message = flotillav1.ClusterUnknown, flotillav1.ReasonIdentityChanged, "answered with another UID"
			return s
		}()}, wantStatus: flotillav1.ClusterUnknown, wantReady: metav1.ConditionFalse, wantRegistered: flotillav1.ReasonIdentityChanged, wantNode: "flotilla-eu"},
		"owner missing": {in: StatusInput{Snapshot: func() clusters.Snapshot {
			s := running
			s.OwnerMessage = "no CRD"
			return s
		}()}, wantStatus: flotillav1.ClusterRunning, wantReady: metav1.ConditionTrue, wantRegistered: flotillav1.ReasonOwnerMissing, wantNode: "flotilla-eu"},
		"primary with a bad Secret": {in: StatusInput{Primary: true, ConfigError: errors.New("bad yaml"),
			Snapshot: clusters.Snapshot{Name: "primary", Role: clusters.RolePrimary, Status: flotillav1.ClusterRunning}},
			wantStatus: flotillav1.ClusterRunning, wantReady: metav1.ConditionTrue, wantRegistered: flotillav1.ReasonPrimary,
			wantValid: metav1.ConditionFalse},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cd := &flotillav1.ClusterDetector{ObjectMeta: metav1.ObjectMeta{Name: tc.in.Snapshot.Name, Generation: 2}}
			setSpec(cd, tc.in)
			setStatus(cd, tc.in)
			st := cd.Status
			if st.ClusterStatus != tc.wantStatus || st.VirtualNode != tc.wantNode || st.ObservedGeneration != 2 {
				t.Errorf("status = %s node %q gen %d", st.ClusterStatus, st.VirtualNode, st.ObservedGeneration)
			}
			ready := meta.FindStatusCondition(st.Conditions, flotillav1.ConditionReady)
			if ready == nil || ready.Status != tc.wantReady || ready.Reason == "" || ready.Message == "" {
				t.Errorf("ready = %+v", ready)
			}
			reg := meta.FindStatusCondition(st.Conditions, flotillav1.ConditionRegistered)
			if reg == nil || reg.Reason != tc.wantRegistered {
				t.Errorf("registered = %+v", reg)
			}
			valid := meta.FindStatusCondition(st.Conditions, flotillav1.ConditionKubeconfigValid)
			if (valid == nil) != (tc.wantValid == "") || (valid != nil && valid.Status != tc.wantValid) {
				t.Errorf("kubeconfig valid = %+v, want %q", valid, tc.wantValid)
			}
		})
	}
	cd := &flotillav1.ClusterDetector{ObjectMeta: metav1.ObjectMeta{Name: "eu"}}
	in := StatusInput{Snapshot: running}
	setSpec(cd, in)
	setStatus(cd, in)
	if cd.Spec.Context != "eu-ctx" || cd.Labels[flotillav1.LabelRole] != flotillav1.RoleSecondary || cd.Status.NodeCount != 3 ||
		cd.Status.TokenExpirationTime == nil || !cd.Status.TokenExpirationTime.Time.Equal(exp) || cd.Status.KubernetesVersion != "v1.35.4" {
		t.Errorf("detector = %+v", cd)
	}
}

// kubectl get clusterdetectors -o wide: the primary's row shows its version, and a reason that
// says why its context and cluster are empty when no registered context names it.
func TestThePrimarysRowSaysWhatItIs(t *testing.T) {
	inCluster := StatusInput{Primary: true, PrimaryVersion: "v1.35.4",
		Snapshot: clusters.Snapshot{Name: "primary", Role: clusters.RolePrimary, Status: flotillav1.ClusterRunning}}
	cd := &flotillav1.ClusterDetector{ObjectMeta: metav1.ObjectMeta{Name: "primary"}}
	setSpec(cd, inCluster)
	setStatus(cd, inCluster)
	if cd.Status.KubernetesVersion != "v1.35.4" || cd.Status.Reason != flotillav1.ReasonPrimary || cd.Status.Message == "" {
		t.Errorf("primary reached in cluster: version %q reason %q message %q", cd.Status.KubernetesVersion, cd.Status.Reason, cd.Status.Message)
	}
	registered := inCluster
	registered.Snapshot.Entry = clusters.Entry{Context: "primary-ctx", Cluster: "primary-cluster", User: "admin"}
	registered.Snapshot.Version = "v1.35.5"
	cd = &flotillav1.ClusterDetector{ObjectMeta: metav1.ObjectMeta{Name: "primary"}}
	setSpec(cd, registered)
	setStatus(cd, registered)
	if cd.Spec.Context != "primary-ctx" || cd.Spec.Cluster != "primary-cluster" || cd.Status.KubernetesVersion != "v1.35.5" || cd.Status.Reason != "" {
		t.Errorf("primary registered by a context: spec %+v version %q reason %q", cd.Spec, cd.Status.KubernetesVersion, cd.Status.Reason)
	}
}

func TestSetReplacementMirrorsTheAnnotation(t *testing.T) {
	cd := &flotillav1.ClusterDetector{ObjectMeta: metav1.ObjectMeta{Name: "old",
		Annotations: map[string]string{flotillav1.AnnotationReplacement: `{"with":"new","step":"Draining","since":"2026-11-26T12:00:00Z"}`}}}
	setReplacement(cd)
	c := meta.FindStatusCondition(cd.Status.Conditions, flotillav1.ConditionReplacement)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "Draining" || !strings.Contains(c.Message, "replaced by new") {
		t.Fatalf("condition = %+v", c)
	}
	cd.Annotations[flotillav1.AnnotationReplacement] = "{"
	setReplacement(cd)
	if c := meta.FindStatusCondition(cd.Status.Conditions, flotillav1.ConditionReplacement); c == nil || c.Status != metav1.ConditionUnknown {
		t.Fatalf("unreadable: %+v", c)
	}
	delete(cd.Annotations, flotillav1.AnnotationReplacement)
	setReplacement(cd)
	if c := meta.FindStatusCondition(cd.Status.Conditions, flotillav1.ConditionReplacement); c != nil {
		t.Fatalf("done: %+v", c)
	}
}

func TestSetStatusShowsAPulledClustersTunnel(t *testing.T) {
	since := time.Date(2030, 1, 1, 0, 0, 0, 500, time.UTC)
	pulled := clusters.Snapshot{Name: "edge", Role: clusters.RoleSecondary, ID: "uid", Status: flotillav1.ClusterRunning, Mode: clusters.ModePull,
		Tunnel: &tunnel.Status{Connected: true, Since: since, RTT: 1234567 * time.Nanosecond, Connects: 3, LastError: "the session closed"}}
	var cd flotillav1.ClusterDetector
	setStatus(&cd, StatusInput{Snapshot: pulled})
	want := flotillav1.TunnelStatus{Connected: true, Since: &metav1.Time{Time: since.Truncate(time.Second)},
		RoundTrip: &metav1.Duration{Duration: 1200 * time.Microsecond}, Connects: 3, LastError: "the session closed"}
	if cd.Status.Mode != flotillav1.ModePull || cd.Status.Tunnel == nil || !equality.Semantic.DeepEqual(*cd.Status.Tunnel, want) {
		t.Fatalf("mode %q, tunnel %+v; want Pull, %+v", cd.Status.Mode, cd.Status.Tunnel, want)
	}
	// Dialled again: neither stays.
	pulled.Mode, pulled.Tunnel = "", nil
	setStatus(&cd, StatusInput{Snapshot: pulled})
	if cd.Status.Mode != "" || cd.Status.Tunnel != nil {
		t.Fatalf("after push mode: %q, %+v", cd.Status.Mode, cd.Status.Tunnel)
	}
}

// A context's ClusterDetector waits for its first probe (it may name the primary itself), but one
// that can never be probed shows its reason at once, and the primary's always exists.
func TestAClusterDetectorWaitsForItsContextsFirstProbe(t *testing.T) {
	probed := clusters.Snapshot{Name: "eu", LastProbe: time.Unix(1, 0)}
	for name, tc := range map[string]struct {
		in   StatusInput
		want bool
	}{
		"not probed yet":       {StatusInput{Snapshot: clusters.Snapshot{Name: "eu"}}, true},
		"probed":               {StatusInput{Snapshot: probed}, false},
		"an invalid context":   {StatusInput{Snapshot: clusters.Snapshot{Name: "eu", Reason: flotillav1.ReasonInvalidContext}}, false},
		"the primary's own":    {StatusInput{Snapshot: clusters.Snapshot{Name: "primary"}, Primary: true}, false},
		"a context not listed": {StatusInput{Snapshot: clusters.Snapshot{Name: "eu", Reason: flotillav1.ReasonNotRegistered}}, false},
	} {
		if got := unprobed(tc.in); got != tc.want {
			t.Errorf("%s: unprobed %v, want %v", name, got, tc.want)
		}
	}
}
