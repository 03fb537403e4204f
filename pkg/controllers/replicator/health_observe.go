package replicator

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/replication"
)

// HealthUnknown is the reason of an object whose health could not be read.
const HealthUnknown = "Unknown"

// observeHealth reads, in one cluster where everything was applied, what the health of the
// applied objects is judged from, and judges it (DeploymentHealth, ServiceHealth, IngressHealth,
// CertificateHealth, and StatusHealth for the kinds without special handling). Reads: the Deployments and their pods, the Services' EndpointSlices
// (label-selected), the Ingresses and their IngressClass, each object of a plain kind; never a Secret (the certificates
// judged are those just applied).
func (r *Reconciler) observeHealth(ctx context.Context, in replication.Inputs, place replication.Place, live client.Reader, objs []*unstructured.Unstructured, cs *flotillav1.ClusterSync) []flotillav1.ObjectHealth {
	rep := in.Replicator
	elect := rep.Spec.Placement == flotillav1.PlacementElect
	var out []flotillav1.ObjectHealth
	unknown := func(kind, name string, err error) {
		out = append(out, flotillav1.ObjectHealth{Kind: kind, Name: name, Reason: HealthUnknown, Message: err.Error()})
	}
	for _, o := range objs {
		key := client.ObjectKeyFromObject(o)
		if _, special := flotillav1.SpecialKind(o.GroupVersionKind().GroupKind()); !special {
			out = append(out, plainHealthIn(ctx, live, o))
			continue
		}
		switch o.GetKind() {
		case "Deployment", "StatefulSet", "DaemonSet":
			h, err := workloadHealthIn(ctx, live, o.GetKind(), key)
			if err != nil {
				unknown(o.GetKind(), key.Name, err)
				continue
			}
			out = append(out, h)
		case "Service":
			// With placement Elect, a Service selects proxies in the primary (no address of their
			// own in an isolated pod network) and delegates in a secondary only where some run.
			if elect && (place.Primary || cs.Replicas == 0) || scaledToZero(rep, o) {
				continue
			}
			h, judged, err := serviceHealthIn(ctx, live, key)
			switch {
			case err != nil:
				unknown("Service", key.Name, err)
			case judged:
				out = append(out, h)
			}
		case "Ingress":
			var ing networkingv1.Ingress
			if err := live.Get(ctx, key, &ing); err != nil {
				unknown("Ingress", key.Name, err)
				continue
			}
			exists, err := ingressClassExists(ctx, live, IngressClassOf(&ing))
			if err != nil {
				unknown("Ingress", key.Name, err)
				continue
			}
			out = append(out, IngressHealth(&ing, exists))
		case "Secret":
			switch {
			case o.GetName() == replication.ServerSecretName && rep.Spec.IngressSecureEnabled:
				out = append(out, CertificateHealth(replication.ServerSecretName, in.ServerTLS["tls.crt"], r.now()))
			case o.GetName() == replication.ClientSecretName && rep.Spec.IngressSecureEnabled:
				out = append(out, CertificateHealth(replication.ClientSecretName, in.ClientTLS["client.crt"], r.now()))
			}
		}
	}
	return out
}

// serviceHealthIn reads a Service and its EndpointSlices (label-selected) and judges it.
func serviceHealthIn(ctx context.Context, live client.Reader, key client.ObjectKey) (flotillav1.ObjectHealth, bool, error) {
	var svc corev1.Service
	if err := live.Get(ctx, key, &svc); err != nil {
		return flotillav1.ObjectHealth{}, false, err
	}
	var endpointSlices discoveryv1.EndpointSliceList
	if err := live.List(ctx, &endpointSlices, client.InNamespace(key.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: key.Name}); err != nil {
		return flotillav1.ObjectHealth{}, false, err
	}
	h, judged := ServiceHealth(&svc, endpointSlices.Items)
	return h, judged, nil
}

// workloadHealthIn reads a Deployment, StatefulSet or DaemonSet and its pods (its own
// selector's) and judges it.
func workloadHealthIn(ctx context.Context, live client.Reader, kind string, key client.ObjectKey) (flotillav1.ObjectHealth, error) {
	var obj client.Object
	var selector func() *metav1.LabelSelector
	var judge func(found bool, pods []corev1.Pod) flotillav1.ObjectHealth
	switch kind {
	case "Deployment":
		d := &appsv1.Deployment{}
		obj, selector = d, func() *metav1.LabelSelector { return d.Spec.Selector }
		judge = func(found bool, pods []corev1.Pod) flotillav1.ObjectHealth {
			return DeploymentHealth(key.Name, orNil(d, found), pods)
		}
	case "StatefulSet":
		s := &appsv1.StatefulSet{}
		obj, selector = s, func() *metav1.LabelSelector { return s.Spec.Selector }
		judge = func(found bool, pods []corev1.Pod) flotillav1.ObjectHealth {
			return StatefulSetHealth(key.Name, orNil(s, found), pods)
		}
	default:
		d := &appsv1.DaemonSet{}
		obj, selector = d, func() *metav1.LabelSelector { return d.Spec.Selector }
		judge = func(found bool, pods []corev1.Pod) flotillav1.ObjectHealth {
			return DaemonSetHealth(key.Name, orNil(d, found), pods)
		}
	}
	if err := live.Get(ctx, key, obj); apierrors.IsNotFound(err) {
		return judge(false, nil), nil
	} else if err != nil {
		return flotillav1.ObjectHealth{}, fmt.Errorf("reading the %s: %w", kind, err)
	}
	var pods corev1.PodList
	if sel, err := metav1.LabelSelectorAsSelector(selector()); err == nil && selector() != nil {
		if err := live.List(ctx, &pods, client.InNamespace(key.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return flotillav1.ObjectHealth{}, fmt.Errorf("listing the %s's pods: %w", kind, err)
		}
	}
	return judge(true, pods.Items), nil
}

// orNil is obj when found, else nil.
func orNil[T any](obj *T, found bool) *T {
	if !found {
		return nil
	}
	return obj
}

// scaledToZero says a Service is the Replicator's own and its Deployment asks for no replica:
// nothing is there to serve, so its endpoints are not judged.
func scaledToZero(rep *flotillav1.Replicator, svc *unstructured.Unstructured) bool {
	d := rep.Spec.DeploymentSpec
	return svc.GetName() == rep.Spec.ServiceName && d != nil && d.Replicas != nil && *d.Replicas == 0
}

// ingressClassExists says whether the cluster has the IngressClass (one get by name).
func ingressClassExists(ctx context.Context, live client.Reader, class string) (bool, error) {
	if class == "" {
		return false, nil
	}
	err := live.Get(ctx, client.ObjectKey{Name: class}, &networkingv1.IngressClass{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading IngressClass %s: %w", class, err)
	}
	return true, nil
}

// plainHealthIn reads an object of a kind without special handling and judges it by its status
// (StatusHealth).
func plainHealthIn(ctx context.Context, live client.Reader, o *unstructured.Unstructured) flotillav1.ObjectHealth {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(o.GroupVersionKind())
	err := live.Get(ctx, client.ObjectKeyFromObject(o), u)
	switch {
	case apierrors.IsNotFound(err):
		return flotillav1.ObjectHealth{Kind: o.GetKind(), Name: o.GetName(), Reason: HealthMissing, Message: "not found"}
	case err != nil:
		return flotillav1.ObjectHealth{Kind: o.GetKind(), Name: o.GetName(), Reason: HealthUnknown, Message: err.Error()}
	}
	return StatusHealth(u)
}
