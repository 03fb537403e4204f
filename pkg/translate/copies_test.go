package translate

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestServiceCopyClearsWhatBelongsToThePrimarysNetwork(t *testing.T) {
	local := corev1.ServiceExternalTrafficPolicyLocal
	single := corev1.IPFamilyPolicySingleStack
	nodePort := func(annotations map[string]string, clusterIP string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo", Annotations: annotations},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
				IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: &single, Selector: map[string]string{"app": "web"},
				Ports:       []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080}},
				ExternalIPs: []string{"192.0.2.1"}, LoadBalancerIP: "192.0.2.2", HealthCheckNodePort: 31000, //nolint:staticcheck // set to see it cleared
				ExternalTrafficPolicy: local, SessionAffinity: corev1.ServiceAffinityClientIP}}
	}
	for _, tc := range []struct {
		name          string
		src           *corev1.Service
		wantType      corev1.ServiceType
		wantClusterIP string
	}{
		{"LoadBalancer becomes ClusterIP", nodePort(nil, "10.96.0.10"), corev1.ServiceTypeClusterIP, ""},
		{"keep-service-type keeps the type", nodePort(map[string]string{flotillav1.AnnotationKeepServiceType: ""}, "10.96.0.10"), corev1.ServiceTypeLoadBalancer, ""},
		{"headless stays headless", nodePort(nil, corev1.ClusterIPNone), corev1.ServiceTypeClusterIP, corev1.ClusterIPNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ServiceCopy(tc.src, "p1", metav1.OwnerReference{Name: "p1"})
			s := got.Spec
			if s.Type != tc.wantType || s.ClusterIP != tc.wantClusterIP {
				t.Errorf("type %s clusterIP %q, want %s %q", s.Type, s.ClusterIP, tc.wantType, tc.wantClusterIP)
			}
			if s.ClusterIPs != nil || s.IPFamilies != nil || s.IPFamilyPolicy != nil || s.ExternalIPs != nil ||
				s.LoadBalancerIP != "" || s.HealthCheckNodePort != 0 || s.Ports[0].NodePort != 0 { //nolint:staticcheck // checked cleared
				t.Errorf("primary-specific fields left: %+v", s)
			}
			if (tc.wantType == corev1.ServiceTypeClusterIP) != (s.ExternalTrafficPolicy == "") {
				t.Errorf("externalTrafficPolicy %q with type %s", s.ExternalTrafficPolicy, s.Type)
			}
			if s.Selector["app"] != "web" || s.Ports[0].TargetPort.IntVal != 8080 || s.SessionAffinity != corev1.ServiceAffinityClientIP {
				t.Errorf("what the Service means was not kept: %+v", s)
			}
			if got.Labels[flotillav1.LabelPrimary] != "p1" || got.Annotations[flotillav1.AnnotationOwner] != flotillav1.OwnerReflect || len(got.OwnerReferences) != 1 {
				t.Errorf("copy metadata: %+v", got.ObjectMeta)
			}
			if tc.src.Spec.ClusterIP == "" || tc.src.Spec.Ports[0].NodePort == 0 {
				t.Error("the source was modified")
			}
		})
	}
}

func TestUsesMatchesReferencesAndSelectors(t *testing.T) {
	proxy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "demo", Labels: map[string]string{"app": "web", "tier": "front"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}},
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}}}}}}
	meta := func(name string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "demo"}}
	}
	svc := func(sel map[string]string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: corev1.ServiceSpec{Selector: sel}}
	}
	np := func(sel metav1.LabelSelector) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{PodSelector: sel}}
	}
	for _, tc := range []struct {
		name string
		kind string
		obj  interface {
			GetName() string
		}
		want bool
	}{
		{"referenced ConfigMap", KindConfigMap, meta("settings"), true},
		{"other ConfigMap", KindConfigMap, meta("creds"), false},
		{"referenced Secret", KindSecret, meta("creds"), true},
		{"a ConfigMap's name is not a Secret", KindSecret, meta("settings"), false},
		{"selecting Service", KindService, svc(map[string]string{"app": "web"}), true},
		{"other Service", KindService, svc(map[string]string{"app": "db"}), false},
		{"selectorless Service selects nothing", KindService, svc(nil), false},
		{"empty pod selector selects all", KindNetworkPolicy, np(metav1.LabelSelector{}), true},
		{"non-matching NetworkPolicy", KindNetworkPolicy, np(metav1.LabelSelector{MatchLabels: map[string]string{"tier": "back"}}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got bool
			switch o := tc.obj.(type) {
			case *metav1.PartialObjectMetadata:
				got = Uses(proxy, tc.kind, o)
			case *corev1.Service:
				got = Uses(proxy, tc.kind, o)
			case *networkingv1.NetworkPolicy:
				got = Uses(proxy, tc.kind, o)
			}
			if got != tc.want {
				t.Errorf("Uses = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIngressCopyKeepsSpecAndAnnotationsNotStatus(t *testing.T) {
	pathType := networkingv1.PathTypePrefix
	backend := func(svc string) networkingv1.IngressBackend {
		return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80}}}
	}
	src := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "u1", ResourceVersion: "7",
			Annotations: map[string]string{"nginx.ingress.kubernetes.io/rewrite-target": "/", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
			Labels:      map[string]string{"app": "web"}},
		Spec: networkingv1.IngressSpec{DefaultBackend: func() *networkingv1.IngressBackend { b := backend("front"); return &b }(), Rules: []networkingv1.IngressRule{{Host: "shop.example",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
				{Path: "/api", PathType: &pathType, Backend: backend("api")}, {Path: "/", PathType: &pathType, Backend: backend("front")}}}}}}},
		Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "203.0.113.7"}}}},
	}
	owner := Owner("p1", "fp-uid")
	c := IngressCopy(src, "p1", owner)
	if c.Annotations["nginx.ingress.kubernetes.io/rewrite-target"] != "/" || c.Annotations[flotillav1.AnnotationOwner] != flotillav1.OwnerReflect {
		t.Errorf("annotations %v", c.Annotations)
	}
	if _, ok := c.Annotations["kubectl.kubernetes.io/last-applied-configuration"]; ok {
		t.Error("kubectl's own annotation copied")
	}
	if c.Labels[flotillav1.LabelPrimary] != "p1" || len(c.OwnerReferences) != 1 || c.UID != "" || c.ResourceVersion != "" {
		t.Errorf("metadata %+v", c.ObjectMeta)
	}
	if len(c.Status.LoadBalancer.Ingress) != 0 {
		t.Error("the primary's load balancer address copied")
	}
	if c.Spec.Rules[0].Host != "shop.example" || len(c.Spec.Rules[0].HTTP.Paths) != 2 {
		t.Errorf("spec %+v", c.Spec)
	}
	if got := IngressServices(src); len(got) != 2 || got[0] != "front" || got[1] != "api" {
		t.Errorf("IngressServices = %v, want [front api]", got)
	}
}

func TestIngressCopyCarriesNoSnippet(t *testing.T) {
	src := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Annotations: map[string]string{
		"nginx.ingress.kubernetes.io/configuration-snippet": "more_set_headers 'X: y';",
		"nginx.ingress.kubernetes.io/server-snippet":        "location /admin { allow all; }",
		"nginx.ingress.kubernetes.io/auth-snippet":          "x",
		"nginx.ingress.kubernetes.io/rewrite-target":        "/",
	}}}
	got := IngressCopy(src, "p", Owner("p", "u")).Annotations
	for k := range got {
		if Snippet(k) {
			t.Errorf("the copy carries %s", k)
		}
	}
	if got["nginx.ingress.kubernetes.io/rewrite-target"] != "/" {
		t.Errorf("an ingress controller's other settings are kept: %v", got)
	}
	if DropSnippets(map[string]string{"a/x-snippet": ""}) != nil {
		t.Error("nothing left is nil")
	}
}
