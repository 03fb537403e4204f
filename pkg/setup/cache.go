package setup

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/controllers/proxy"
)

// cacheOptions restrict the manager's cache to what Flotilla reads of the primary; the
// reconcilers rely on them (a proxy is slim, Secrets are read in flotilla-system only).
func cacheOptions() (cache.Options, error) {
	replicated, err := labels.Parse(flotillav1.LabelReplicator)
	if err != nil {
		return cache.Options{}, fmt.Errorf("parsing the replicated-object selector: %w", err)
	}
	ofAService, err := labels.Parse(discoveryv1.LabelServiceName)
	if err != nil {
		return cache.Options{}, fmt.Errorf("parsing the EndpointSlice selector: %w", err)
	}
	system := map[string]cache.Config{flotillav1.SystemNamespace: {}}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		// Secrets are read in flotilla-system only (the registration Secret); nothing else needs them.
		&corev1.Secret{}:              {Namespaces: system},
		&flotillav1.ClusterDetector{}: {Namespaces: system},
		// Only proxies: the primary's other pods are none of Flotilla's business; proxies without
		// what Flotilla never reads back (proxy.SlimProxy). Nothing reads a virtual node's
		// managedFields (2.5 MB of the live heap at 1000 proxies).
		&corev1.Pod{}: {Label: labels.SelectorFromSet(labels.Set{flotillav1.LabelProxy: "true"}), Transform: proxy.SlimProxy},
		// Only virtual nodes (the webhook reads their cordon and taints).
		&corev1.Node{}: {Label: labels.SelectorFromSet(labels.Set{flotillav1.LabelNodeType: flotillav1.NodeTypeVirtualKubelet}),
			Transform: cache.TransformStripManagedFields()},
		// What Replicators applied (drift watches); a Deployment not Flotilla's is read uncached.
		// Every Ingress is cached: one whose backends select elected pods follows them.
		// EndpointSlices of Services (Multi-Cluster Services: an exported Service's are its
		// endpoints; an import's carry its derived Service's name).
		&discoveryv1.EndpointSlice{}: {Label: ofAService, Transform: cache.TransformStripManagedFields()},
		&appsv1.Deployment{}:         {Label: replicated},
		&corev1.ConfigMap{}:          {Label: replicated},
	}}, nil
}
