package replicator

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// The kinds whose drift is repaired at once are watched as the typed objects the manager's cache
// shares with the other controllers, and a kind the scheme lacks is an error, not a silent gap.
func TestWatchedKinds(t *testing.T) {
	objs, err := watchedKinds(clientgoscheme.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o.(type) {
		case *corev1.ConfigMap, *corev1.Service, *appsv1.Deployment, *networkingv1.Ingress:
		default:
			t.Errorf("watched %T", o)
		}
	}
	if len(objs) != 4 {
		t.Errorf("watched %d kinds, want ConfigMap, Service, Deployment and Ingress", len(objs))
	}
	if _, err := watchedKinds(runtime.NewScheme()); err == nil {
		t.Error("a scheme without the watched kinds is accepted")
	}
}
