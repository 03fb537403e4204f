package replication

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/overrides"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// Names of the TLS Secrets (plumber's).
const (
	ServerSecretName = "ca-secret"
	ClientSecretName = "cli-secret"
	// LabelDeployment carries the Deployment's name in derived selectors.
	LabelDeployment = "flotilla.dev/deployment"
	// defaultIngressClass is plumber's class, applied only when the spec names none.
	defaultIngressClass = "nginx"
)

// Allowed maps the kinds a Replicator writes (flotillav1.ReplicatedKinds: those its resources may
// hold, and the Certificates of tls.issuerRef, listed so that they are removed too) to their
// group-version-kind.
var Allowed = func() map[string]schema.GroupVersionKind {
	out := make(map[string]schema.GroupVersionKind, len(flotillav1.ReplicatedKinds))
	for _, k := range flotillav1.ReplicatedKinds {
		out[k.Kind] = k.GroupVersionKind()
	}
	return out
}()

// Place is one cluster a Replicator applies to, and what is known of it.
type Place struct {
	// Cluster is the cluster's name; Primary says it is the primary.
	Cluster string
	Primary bool
	// LiveSelector is the selector of the Deployment already there (immutable: it is kept).
	LiveSelector *metav1.LabelSelector
	// LiveDeployment is that Deployment (nil when there is none): whose it is is judged from it,
	// without reading it again.
	LiveDeployment *appsv1.Deployment
	// HPA says a HorizontalPodAutoscaler targets the Deployment there: replicas are left to it.
	HPA bool
	// Overrides is what their cluster selectors see of the cluster (a secondary's).
	Overrides overrides.Cluster
}

// Inputs are what every place shares.
type Inputs struct {
	Replicator *flotillav1.Replicator
	PrimaryID  string
	// ElectClusters are the secondaries a Deployment with placement Elect is elected to.
	ElectClusters []string
	// ServerTLS and ClientTLS are the data of ca-secret and cli-secret (nil when TLS is off).
	ServerTLS, ClientTLS map[string][]byte
	// PodSecurityLabels are the primary namespace's pod-security.kubernetes.io/* labels: the
	// namespace in each secondary carries them, so that a workload the primary would refuse is
	// refused there too.
	PodSecurityLabels map[string]string
	// Overrides are the ClusterOverrides and the replication namespace's Overrides: what they
	// change in a secondary's copies.
	Overrides []overrides.Source
}

// overridden is what this cluster's Overrides change in the copies, before the marks (which no
// rule may take away); the primary's are left alone. A rule that cannot apply fails the place:
// nothing half-changed is applied there.
func overridden(objs []*unstructured.Unstructured, in Inputs, at Place) ([]*unstructured.Unstructured, error) {
	if at.Primary || len(in.Overrides) == 0 {
		return objs, nil
	}
	for i, u := range objs {
		changed, applied, err := overrides.Apply(u, overrides.ObjectSubject(u), at.Overrides, in.Overrides)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		if len(applied) > 0 {
			ann := changed.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			ann[flotillav1.AnnotationOverrides] = overrides.Names(applied)
			changed.SetAnnotations(ann)
		}
		objs[i] = changed
	}
	return objs, nil
}

// Desired lists the objects a Replicator applies in one place, in apply order. It is pure: the
// caller reads the live selector and HPAs, and the TLS material.
func Desired(in Inputs, at Place) ([]*unstructured.Unstructured, error) {
	r := in.Replicator
	spec := r.Spec
	var objs []runtime.Object
	if spec.ConfigMapName != "" {
		objs = append(objs, &corev1.ConfigMap{TypeMeta: typeMeta("ConfigMap"),
			ObjectMeta: metav1.ObjectMeta{Name: spec.ConfigMapName}, Data: spec.ConfigMapData})
	}
	if spec.IngressSecureEnabled && in.ServerTLS != nil {
		objs = append(objs, &corev1.Secret{TypeMeta: typeMeta("Secret"), ObjectMeta: metav1.ObjectMeta{Name: ServerSecretName},
			Type: corev1.SecretTypeTLS, Data: in.ServerTLS})
		if in.ClientTLS != nil && (at.Primary || (spec.TLS != nil && spec.TLS.ReplicateClientSecret)) {
			objs = append(objs, &corev1.Secret{TypeMeta: typeMeta("Secret"), ObjectMeta: metav1.ObjectMeta{Name: ClientSecretName},
				Type: corev1.SecretTypeOpaque, Data: in.ClientTLS})
		}
	}
	selector := Selector(r, at.LiveSelector)
	if d := deployment(in, at, selector); d != nil {
		objs = append(objs, d)
	}
	if spec.ServiceName != "" {
		objs = append(objs, service(r, selector))
	}
	if spec.IngressName != "" && spec.IngressSpec != nil {
		objs = append(objs, ingress(r, in.ServerTLS != nil))
	}
	out := make([]*unstructured.Unstructured, 0, len(objs)+len(spec.Resources))
	for _, o := range objs {
		u, err := toUnstructured(o)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	for i, m := range spec.Resources {
		raw, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("resources[%d]: %w", i, err)
		}
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(raw, &u.Object); err != nil {
			return nil, fmt.Errorf("resources[%d]: %w", i, err)
		}
		out = append(out, u)
	}
	out, err := overridden(out, in, at)
	if err != nil {
		return nil, err
	}
	for _, u := range out {
		Mark(u, in, at)
	}
	return out, nil
}

// Mark puts the namespace, Flotilla's labels and the owner annotation on an object.
func Mark(u *unstructured.Unstructured, in Inputs, at Place) {
	u.SetNamespace(in.Replicator.Spec.ReplicationNamespace)
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[flotillav1.LabelReplicator] = flotillav1.ReplicatorLabelValue(in.Replicator.Name)
	if !at.Primary {
		labels[flotillav1.LabelPrimary] = in.PrimaryID
	}
	u.SetLabels(labels)
	ann := u.GetAnnotations()
	if u.GetKind() == "Ingress" {
		// Never a snippet (raw ingress controller configuration) in any cluster: in a secondary
		// the primary's admission rules about them do not run, and its fence refuses them.
		ann = translate.DropSnippets(ann)
	}
	if ann == nil {
		ann = map[string]string{}
	}
	ann[flotillav1.AnnotationOwner] = flotillav1.OwnerReplicatorPrefix + in.Replicator.Name
	u.SetAnnotations(ann)
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
}

// Selector is the Deployment's selector: the live one (immutable), else the spec's, else labels
// derived from the Replicator and Deployment names (plumber's sample gives none).
func Selector(r *flotillav1.Replicator, live *metav1.LabelSelector) *metav1.LabelSelector {
	switch {
	case live != nil:
		return live.DeepCopy()
	case r.Spec.DeploymentSpec != nil && r.Spec.DeploymentSpec.Selector != nil:
		return r.Spec.DeploymentSpec.Selector.DeepCopy()
	default:
		return &metav1.LabelSelector{MatchLabels: map[string]string{
			flotillav1.LabelReplicator: flotillav1.ReplicatorLabelValue(r.Name), LabelDeployment: flotillav1.ReplicatorLabelValue(r.Spec.DeploymentName)}}
	}
}

func deployment(in Inputs, at Place, selector *metav1.LabelSelector) *appsv1.Deployment {
	r := in.Replicator
	src := r.Spec.DeploymentSpec
	if src == nil || r.Spec.DeploymentName == "" {
		return nil
	}
	elect := r.Spec.Placement == flotillav1.PlacementElect
	if elect && !at.Primary {
		return nil // its pods are elected from the primary
	}
	tmpl := *src.Template.DeepCopy()
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	for k, v := range selector.MatchLabels {
		tmpl.Labels[k] = v
	}
	if elect {
		if tmpl.Annotations == nil {
			tmpl.Annotations = map[string]string{}
		}
		tmpl.Annotations[flotillav1.AnnotationElect] = ""
		if len(in.ElectClusters) > 0 {
			tmpl.Annotations[flotillav1.AnnotationClusters] = strings.Join(in.ElectClusters, ",")
		}
	}
	spec := appsv1.DeploymentSpec{Selector: selector, Template: tmpl, Strategy: src.Strategy,
		MinReadySeconds: src.MinReadySeconds, RevisionHistoryLimit: src.RevisionHistoryLimit, Paused: src.Paused,
		ProgressDeadlineSeconds: src.ProgressDeadlineSeconds}
	if !at.HPA {
		spec.Replicas = src.Replicas // nil: not applied, so whoever scales keeps the count
	}
	return &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: r.Spec.DeploymentName}, Spec: spec}
}

func service(r *flotillav1.Replicator, selector *metav1.LabelSelector) *corev1.Service {
	spec := corev1.ServiceSpec{}
	if r.Spec.ServiceSpec != nil {
		spec = *r.Spec.ServiceSpec.DeepCopy()
	}
	if len(spec.Selector) == 0 && r.Spec.DeploymentSpec != nil {
		spec.Selector = selector.MatchLabels
	}
	return &corev1.Service{TypeMeta: typeMeta("Service"), ObjectMeta: metav1.ObjectMeta{Name: r.Spec.ServiceName}, Spec: spec}
}

func ingress(r *flotillav1.Replicator, tls bool) *networkingv1.Ingress {
	spec := *r.Spec.IngressSpec.DeepCopy()
	if spec.IngressClassName == nil {
		class := defaultIngressClass
		spec.IngressClassName = &class
	}
	ing := &networkingv1.Ingress{TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: metav1.ObjectMeta{Name: r.Spec.IngressName}, Spec: spec}
	if tls && r.Spec.IngressSecureEnabled {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: Hosts(r), SecretName: ServerSecretName}}
		ing.Annotations = map[string]string{
			"nginx.ingress.kubernetes.io/auth-tls-secret":        r.Spec.ReplicationNamespace + "/" + ServerSecretName,
			"nginx.ingress.kubernetes.io/auth-tls-verify-client": "on",
		}
	}
	return ing
}

// Hosts are the Ingress rules' hosts, sorted, each once: the server certificate covers them all.
func Hosts(r *flotillav1.Replicator) []string {
	if r.Spec.IngressSpec == nil {
		return nil
	}
	seen := map[string]bool{}
	var hosts []string
	for _, rule := range r.Spec.IngressSpec.Rules {
		if rule.Host != "" && !seen[rule.Host] {
			seen[rule.Host] = true
			hosts = append(hosts, rule.Host)
		}
	}
	sort.Strings(hosts)
	return hosts
}

func typeMeta(kind string) metav1.TypeMeta { return metav1.TypeMeta{APIVersion: "v1", Kind: kind} }

func toUnstructured(o runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, fmt.Errorf("converting %T: %w", o, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}
