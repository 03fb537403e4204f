package replicator

import (
	"encoding/pem"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/pki"
	"github.com/flotilla-dev/flotilla/pkg/replication"
)

func deploymentWith(generation, observed int64, replicas, updated, available, total int32) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: generation},
		Spec:   appsv1.DeploymentSpec{Replicas: &replicas},
		Status: appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: total, UpdatedReplicas: updated, AvailableReplicas: available}}
}

func waitingPod(reason, msg string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}}}
}

func TestDeploymentHealth(t *testing.T) {
	deadline := deploymentWith(2, 2, 2, 1, 1, 2)
	deadline.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
		Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "web-2" has timed out progressing.`}}
	for _, tc := range []struct {
		name       string
		d          *appsv1.Deployment
		pods       []corev1.Pod
		healthy    bool
		reason     string
		failing    bool
		messageHas string
	}{
		{"missing", nil, nil, false, HealthMissing, false, "not found"},
		{"available", deploymentWith(3, 3, 2, 2, 2, 2), nil, true, HealthAvailable, false, "2 of 2"},
		{"generation not observed yet: whatever the counts say", deploymentWith(4, 3, 2, 2, 2, 2), nil, false, HealthProgressing, false, "generation 4"},
		{"not all available", deploymentWith(3, 3, 2, 2, 1, 2), nil, false, HealthProgressing, false, "1 of 2"},
		{"old replicas left", deploymentWith(3, 3, 2, 2, 2, 3), nil, false, HealthProgressing, false, "2 updated"},
		{"an image that cannot be pulled fails", deploymentWith(3, 3, 2, 1, 2, 3), []corev1.Pod{waitingPod("ImagePullBackOff", `Back-off pulling image "nope"`)},
			false, HealthImagePullFailed, true, `pod web-1 container app: ImagePullBackOff: Back-off pulling image "nope"`},
		{"crashing containers fail", deploymentWith(3, 3, 2, 1, 1, 2), []corev1.Pod{waitingPod("CrashLoopBackOff", "")}, false, HealthContainersFailing, true, "CrashLoopBackOff"},
		{"a container still being created only progresses", deploymentWith(3, 3, 2, 1, 1, 2), []corev1.Pod{waitingPod("ContainerCreating", "")}, false, HealthProgressing, false, "1 of 2"},
		{"past its progress deadline", deadline, nil, false, HealthProgressDeadlineExceeded, true, "timed out"},
		{"default of one replica", func() *appsv1.Deployment { d := deploymentWith(1, 1, 1, 1, 1, 1); d.Spec.Replicas = nil; return d }(), nil, true, HealthAvailable, false, "1 of 1"},
		{"scaled to zero", deploymentWith(1, 1, 0, 0, 0, 0), nil, true, HealthAvailable, false, "0 of 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := DeploymentHealth("web", tc.d, tc.pods)
			if h.Kind != "Deployment" || h.Name != "web" || h.Healthy != tc.healthy || h.Reason != tc.reason || h.Failing != tc.failing ||
				!strings.Contains(h.Message, tc.messageHas) {
				t.Errorf("got %+v; want healthy %v, reason %s, failing %v, message with %q", h, tc.healthy, tc.reason, tc.failing, tc.messageHas)
			}
		})
	}
}

func TestServiceHealth(t *testing.T) {
	yes, no := true, false
	selecting := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}}}
	slice := func(ready ...*bool) discoveryv1.EndpointSlice {
		s := discoveryv1.EndpointSlice{}
		for _, r := range ready {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: r}})
		}
		return s
	}
	for _, tc := range []struct {
		name            string
		svc             *corev1.Service
		slices          []discoveryv1.EndpointSlice
		judged, healthy bool
		reason          string
	}{
		{"a ready endpoint", selecting, []discoveryv1.EndpointSlice{slice(&no), slice(&yes)}, true, true, HealthAvailable},
		{"ready unset counts as ready (the API's meaning)", selecting, []discoveryv1.EndpointSlice{slice(nil)}, true, true, HealthAvailable},
		{"only endpoints not ready", selecting, []discoveryv1.EndpointSlice{slice(&no)}, true, false, HealthNoEndpoints},
		{"no slice", selecting, nil, true, false, HealthNoEndpoints},
		{"no selector: its endpoints are someone else's", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext"}}, nil, false, false, ""},
		{"ExternalName", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName,
			Selector: map[string]string{"a": "b"}}}, nil, false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, judged := ServiceHealth(tc.svc, tc.slices)
			if judged != tc.judged || h.Healthy != tc.healthy || h.Reason != tc.reason || h.Failing {
				t.Errorf("got %+v judged %v; want judged %v healthy %v reason %s", h, judged, tc.judged, tc.healthy, tc.reason)
			}
		})
	}
}

func TestIngressHealth(t *testing.T) {
	nginx := "nginx"
	ing := func(lb ...networkingv1.IngressLoadBalancerIngress) *networkingv1.Ingress {
		return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: networkingv1.IngressSpec{IngressClassName: &nginx},
			Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: lb}}}
	}
	for _, tc := range []struct {
		name        string
		ing         *networkingv1.Ingress
		classExists bool
		healthy     bool
		reason      string
		messageHas  string
	}{
		{"admitted: an address", ing(networkingv1.IngressLoadBalancerIngress{IP: "10.0.0.1"}), true, true, HealthAdmitted, "10.0.0.1"},
		{"admitted: a host name", ing(networkingv1.IngressLoadBalancerIngress{Hostname: "lb.example"}), true, true, HealthAdmitted, "lb.example"},
		{"its class exists, no address yet", ing(), true, false, HealthNotAdmitted, `"nginx"`},
		{"no such class: no controller would ever admit it, not judged", ing(), false, true, HealthNoIngressController, `IngressClass "nginx"`},
		{"no class named", &networkingv1.Ingress{}, false, true, HealthNoIngressController, "names no IngressClass"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := IngressHealth(tc.ing, tc.classExists)
			if h.Kind != "Ingress" || h.Healthy != tc.healthy || h.Reason != tc.reason || h.Failing || !strings.Contains(h.Message, tc.messageHas) {
				t.Errorf("got %+v; want healthy %v reason %s message with %q", h, tc.healthy, tc.reason, tc.messageHas)
			}
		})
	}
	old := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"kubernetes.io/ingress.class": "traefik"}}}
	if got := IngressClassOf(old); got != "traefik" {
		t.Errorf("class of the annotation: %q", got)
	}
}

// certPEM is a certificate valid from notBefore (a minute earlier: pki's margin) for validity.
func certPEM(t *testing.T, notBefore time.Time, validity time.Duration) []byte {
	t.Helper()
	ca, err := pki.NewCA("web", notBefore.Add(time.Minute), validity)
	if err != nil {
		t.Fatal(err)
	}
	return ca.CertPEM
}

func TestCertificateHealth(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		pem     []byte
		healthy bool
		reason  string
	}{
		{"valid", certPEM(t, now.Add(-time.Hour), time.Hour), true, HealthValid},
		{"expired", certPEM(t, now.Add(-2*time.Hour), time.Hour), false, HealthExpired},
		{"not yet valid", certPEM(t, now.Add(time.Hour), time.Hour), false, HealthNotYetValid},
		{"no PEM", []byte("junk"), false, HealthInvalid},
		{"nothing", nil, false, HealthInvalid},
		{"a PEM block that is no certificate", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")}), false, HealthInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := CertificateHealth(replication.ServerSecretName, tc.pem, now)
			if h.Kind != "Secret" || h.Name != replication.ServerSecretName || h.Healthy != tc.healthy || h.Reason != tc.reason || h.Failing == tc.healthy {
				t.Errorf("got %+v; want healthy %v reason %s, failing unless healthy", h, tc.healthy, tc.reason)
			}
		})
	}
}

func TestHealthyCondition(t *testing.T) {
	ok := flotillav1.ObjectHealth{Kind: "Deployment", Name: "web", Healthy: true, Reason: HealthAvailable}
	bad := flotillav1.ObjectHealth{Kind: "Deployment", Name: "web", Reason: HealthImagePullFailed, Failing: true, Message: "pod web-1: ErrImagePull"}
	healthy := func(name string) flotillav1.ClusterSync {
		return flotillav1.ClusterSync{Name: name, Synced: true, Healthy: true, Health: []flotillav1.ObjectHealth{ok}}
	}
	for _, tc := range []struct {
		name       string
		clusters   []flotillav1.ClusterSync
		status     metav1.ConditionStatus
		reason     string
		messageHas string
	}{
		{"every cluster healthy", []flotillav1.ClusterSync{healthy(PrimaryName), healthy("s1")}, metav1.ConditionTrue, flotillav1.ReasonHealthy, "2 object(s) healthy in 2 cluster(s)"},
		{"one unhealthy, named with its object and reason", []flotillav1.ClusterSync{healthy(PrimaryName),
			{Name: "s1", Synced: true, Health: []flotillav1.ObjectHealth{ok, bad}}}, metav1.ConditionFalse, flotillav1.ReasonUnhealthy,
			"s1: Deployment web: ImagePullFailed: pod web-1: ErrImagePull"},
		{"not synced", []flotillav1.ClusterSync{healthy(PrimaryName), {Name: "s1", Message: "timeout"}}, metav1.ConditionFalse, flotillav1.ReasonNotSynced, "s1: timeout"},
		{"unhealthy wins over not synced and held", []flotillav1.ClusterSync{{Name: "s1", Synced: true, Health: []flotillav1.ObjectHealth{bad}},
			{Name: "s2", Message: "timeout"}, {Name: "s3", Held: true}}, metav1.ConditionFalse, flotillav1.ReasonUnhealthy, "s1"},
		{"a cluster waits for its wave, its old health aside", []flotillav1.ClusterSync{healthy("s1"),
			{Name: "s2", Held: true, Healthy: true, Health: []flotillav1.ObjectHealth{ok}}}, metav1.ConditionFalse, flotillav1.ReasonRolloutIncomplete, "s2"},
		{"nothing judged (only a ConfigMap)", []flotillav1.ClusterSync{{Name: PrimaryName, Synced: true, Healthy: true}}, metav1.ConditionTrue, flotillav1.ReasonHealthy, "0 object(s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := HealthyCondition(7, tc.clusters)
			if c.Type != flotillav1.ConditionHealthy || c.Status != tc.status || c.Reason != tc.reason || c.ObservedGeneration != 7 || !strings.Contains(c.Message, tc.messageHas) {
				t.Errorf("got %+v; want %s %s with %q", c, tc.status, tc.reason, tc.messageHas)
			}
		})
	}
}

func TestStatefulSetAndDaemonSetHealth(t *testing.T) {
	three, two := int32(3), int32(2)
	sts := func(generation, observed int64, updated, available, total int32, strategy appsv1.StatefulSetUpdateStrategy) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: generation}, Spec: appsv1.StatefulSetSpec{Replicas: &three, UpdateStrategy: strategy},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: observed, UpdatedReplicas: updated, AvailableReplicas: available, Replicas: total}}
	}
	rolling := appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
	partitioned := appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: &two}}
	onDelete := appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	ds := func(generation, observed int64, desired, updated, available, current int32) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Generation: generation}, Status: appsv1.DaemonSetStatus{ObservedGeneration: observed,
			DesiredNumberScheduled: desired, UpdatedNumberScheduled: updated, NumberAvailable: available, CurrentNumberScheduled: current}}
	}
	for _, tc := range []struct {
		name    string
		h       flotillav1.ObjectHealth
		healthy bool
		reason  string
	}{
		{"StatefulSet: all updated and available", StatefulSetHealth("db", sts(2, 2, 3, 3, 3, rolling), nil), true, HealthAvailable},
		{"StatefulSet: one not updated yet", StatefulSetHealth("db", sts(2, 2, 2, 3, 3, rolling), nil), false, HealthProgressing},
		{"StatefulSet: below its partition, replicas keep their revision", StatefulSetHealth("db", sts(2, 2, 1, 3, 3, partitioned), nil), true, HealthAvailable},
		{"StatefulSet: OnDelete, whatever revision", StatefulSetHealth("db", sts(2, 2, 0, 3, 3, onDelete), nil), true, HealthAvailable},
		{"StatefulSet: a pod that cannot pull", StatefulSetHealth("db", sts(2, 2, 2, 2, 3, rolling), []corev1.Pod{waitingPod("ErrImagePull", "")}), false, HealthImagePullFailed},
		{"StatefulSet: generation not observed", StatefulSetHealth("db", sts(3, 2, 3, 3, 3, rolling), nil), false, HealthProgressing},
		{"StatefulSet: missing", StatefulSetHealth("db", nil, nil), false, HealthMissing},
		{"DaemonSet: on every node", DaemonSetHealth("agent", ds(1, 1, 4, 4, 4, 4), nil), true, HealthAvailable},
		{"DaemonSet: old pods left", DaemonSetHealth("agent", ds(2, 2, 4, 3, 4, 4), nil), false, HealthProgressing},
		{"DaemonSet: crashing", DaemonSetHealth("agent", ds(2, 2, 4, 4, 3, 4), []corev1.Pod{waitingPod("CrashLoopBackOff", "")}), false, HealthContainersFailing},
		{"DaemonSet: no node to run on", DaemonSetHealth("agent", ds(1, 1, 0, 0, 0, 0), nil), true, HealthAvailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.h.Healthy != tc.healthy || tc.h.Reason != tc.reason || tc.h.Failing != (tc.reason == HealthImagePullFailed || tc.reason == HealthContainersFailing) {
				t.Errorf("got %+v; want healthy %v reason %s", tc.h, tc.healthy, tc.reason)
			}
		})
	}
}
