package mcs

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// ManagedBy is the endpointslice.kubernetes.io/managed-by value of the EndpointSlices Flotilla
// writes for imports: the Kubernetes EndpointSlice controller leaves them alone, and CoreDNS and
// the conformance suite tell them from a Service's own.
const ManagedBy = "flotilla.dev"

// DerivedServicePrefix begins the name of every Service that gives an import its address: the
// fences in both roles and `cluster remove` know them by it.
const DerivedServicePrefix = "flotilla-mcs-"

// DerivedServiceName is the name of the Service without selector that gives a ClusterSetIP
// import its address in each cluster: kube-proxy forwards that address to the EndpointSlices
// labelled with this name. Short names keep theirs readable; long ones are hashed to fit a label.
func DerivedServiceName(name string) string {
	if len(DerivedServicePrefix)+len(name) <= 63 {
		return DerivedServicePrefix + name
	}
	return DerivedServicePrefix + shortHash(name, 16)
}

// SliceName is the name of the EndpointSlice mirroring the source EndpointSlice of an exporting
// cluster: stable, so it is applied, not re-created, and unique per cluster and source.
func SliceName(service, cluster, source string) string {
	base := service
	if len(base) > 40 {
		base = base[:40]
	}
	return base + "-" + shortHash(cluster+"/"+source, 12)
}

func shortHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}

// Slice is the EndpointSlice an import carries for one source EndpointSlice of an exporting
// cluster: its ready endpoints (addresses, hostname, zone; never the pod or node of another
// cluster), its ports among those the cluster serves for the import (ports), labelled with the
// MCS labels, the managed-by value and the derived Service's name (kube-proxy forwards a
// ClusterSetIP import's address to it). Nil when nothing of it is served.
func Slice(namespace, service, cluster string, ports []string, source *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	out := &discoveryv1.EndpointSlice{AddressType: source.AddressType}
	out.Namespace, out.Name = namespace, SliceName(service, cluster, source.Name)
	// kubernetes.io/service-name is the derived Service's, whatever the import's type: kube-proxy
	// forwards a ClusterSetIP import's address to them, a headless import has no such Service
	// (nothing forwards), and every EndpointSlice that belongs to a Service carries the label (the
	// manager caches only those).
	out.Labels = map[string]string{
		mcsv1beta1.LabelServiceName:   service,
		mcsv1beta1.LabelSourceCluster: cluster,
		discoveryv1.LabelManagedBy:    ManagedBy,
		discoveryv1.LabelServiceName:  DerivedServiceName(service),
	}
	for _, p := range source.Ports {
		if p.Name != nil && slices.Contains(ports, *p.Name) || p.Name == nil && slices.Contains(ports, "") {
			out.Ports = append(out.Ports, *p.DeepCopy())
		}
	}
	if len(out.Ports) == 0 {
		return nil
	}
	for _, e := range source.Endpoints {
		if e.Conditions.Ready != nil && !*e.Conditions.Ready {
			continue
		}
		ready := true
		out.Endpoints = append(out.Endpoints, discoveryv1.Endpoint{Addresses: slices.Clone(e.Addresses), Hostname: e.Hostname,
			Zone: e.Zone, Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &ready, Terminating: new(bool)}})
	}
	return out
}

// DerivedService is the Service that gives a ClusterSetIP import its address in one cluster:
// no selector (its EndpointSlices are the import's), the import's ports and session affinity.
func DerivedService(namespace, service string, spec *mcsv1beta1.ServiceImportSpec) *corev1.Service {
	out := &corev1.Service{}
	out.Namespace, out.Name = namespace, DerivedServiceName(service)
	policy := corev1.IPFamilyPolicyPreferDualStack
	out.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, IPFamilyPolicy: &policy,
		SessionAffinity: spec.SessionAffinity, SessionAffinityConfig: spec.SessionAffinityConfig.DeepCopy(),
		InternalTrafficPolicy: spec.InternalTrafficPolicy, TrafficDistribution: spec.TrafficDistribution}
	for _, p := range spec.Ports {
		out.Spec.Ports = append(out.Spec.Ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol, Port: p.Port})
	}
	return out
}
