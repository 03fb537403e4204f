package webhook

import (
	"cmp"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// ConfigOptions say how the API server reaches the webhook.
type ConfigOptions struct {
	// Name is the configuration's name; "": flotillav1.WebhookConfigurationName.
	Name string
	// URL, when set, is the webhook's address (out of cluster: https://127.0.0.1:PORT).
	URL string
	// Service and Namespace name the webhook's Service otherwise (port 443).
	Service, Namespace string
	// CABundle verifies the webhook's serving certificate.
	CABundle []byte
	// CAInjectedFrom, when set, is the namespace/name of the cert-manager Certificate that serves
	// the webhook: the configuration carries cert-manager's inject-ca-from annotation and no
	// CABundle, cert-manager's CA injector writes it.
	CAInjectedFrom string
	// AcceptAdmiralty also sends pods annotated multicluster.admiralty.io/elect.
	AcceptAdmiralty bool
}

// Configuration is the MutatingWebhookConfiguration Flotilla owns: only elected pods in enabled
// namespaces reach the webhook (matchConditions), so its outage never blocks other pods.
func Configuration(o ConfigOptions) *admissionregistrationv1.MutatingWebhookConfiguration {
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	// Never: the mutation is computed once from the pod as the user wrote it; a reinvocation would
	// see a proxy, indistinguishable from a forged one (which is refused).
	never := admissionregistrationv1.NeverReinvocationPolicy
	timeout := int32(5)
	elect := fmt.Sprintf("has(object.metadata.annotations) && '%s' in object.metadata.annotations", flotillav1.AnnotationElect)
	if o.AcceptAdmiralty {
		elect = fmt.Sprintf("has(object.metadata.annotations) && ('%s' in object.metadata.annotations || '%s' in object.metadata.annotations)",
			flotillav1.AnnotationElect, flotillav1.AnnotationAdmiraltyElect)
	}
	var annotations map[string]string
	if o.CAInjectedFrom != "" {
		annotations = map[string]string{flotillav1.AnnotationInjectCAFrom: o.CAInjectedFrom}
	}
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: cmp.Or(o.Name, flotillav1.WebhookConfigurationName), Labels: map[string]string{"app.kubernetes.io/part-of": "flotilla"},
			Annotations: annotations},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "pods.flotilla.dev",
			ClientConfig:            o.clientConfig(Path),
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          &timeout,
			ReinvocationPolicy:      &never,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{flotillav1.LabelEnabled: "true"}},
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: flotillav1.LabelPrimary, Operator: metav1.LabelSelectorOpDoesNotExist}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "elected", Expression: elect}},
		}, daemonSetWebhook(o), replicatorWebhook(o), overrideWebhook(o)},
	}
}

// daemonSetWebhook sends DaemonSets whose pod template is new or changed: an update that leaves
// the template alone is not mutated, so it never starts a rollout by itself. Its outage lets
// DaemonSets through unchanged (flotillactl doctor lists those that can reach virtual nodes).
func daemonSetWebhook(o ConfigOptions) admissionregistrationv1.MutatingWebhook {
	ignore := admissionregistrationv1.Ignore
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(3)
	return admissionregistrationv1.MutatingWebhook{
		Name:                    "daemonsets.flotilla.dev",
		ClientConfig:            o.clientConfig(DaemonSetPath),
		AdmissionReviewVersions: []string{"v1"},
		SideEffects:             &none,
		FailurePolicy:           &ignore,
		TimeoutSeconds:          &timeout,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"daemonsets"}},
		}},
		MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "template-changed",
			Expression: "request.operation == 'CREATE' || object.spec.template != oldObject.spec.template"}},
	}
}

// replicatorWebhook sends Replicators created, or updated with a changed spec, to the check of
// their author's rights (ReplicatorHandler). It never mutates: it lives in the one configuration
// the manager owns (its RBAC names that one only). Fail closed: without the check a Replicator
// would write with the manager's rights. An update that leaves the spec alone (the manager's
// finalizer, a label) is not sent, so the manager's own writes never depend on it. IfNeeded: a
// later webhook that changed the spec gets it checked again.
func replicatorWebhook(o ConfigOptions) admissionregistrationv1.MutatingWebhook {
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	again := admissionregistrationv1.IfNeededReinvocationPolicy
	// One SubjectAccessReview per right: a few dozen at most, each a local call of the API server.
	timeout := int32(10)
	return admissionregistrationv1.MutatingWebhook{
		Name:                    "replicators.flotilla.dev",
		ClientConfig:            o.clientConfig(ReplicatorPath),
		AdmissionReviewVersions: []string{"v1"},
		SideEffects:             &none,
		FailurePolicy:           &fail,
		TimeoutSeconds:          &timeout,
		ReinvocationPolicy:      &again,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{flotillav1.GroupVersion.Group}, APIVersions: []string{"*"},
				Resources: []string{"replicators"}},
		}},
		MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "spec-changed",
			Expression: "request.operation == 'CREATE' || object.spec != oldObject.spec"}},
	}
}

// overrideWebhook sends Overrides created, or updated with a changed spec, to the check of their
// author's rights and of the fence (OverrideHandler). Fail closed, as the Replicators': without
// it an Override would change what goes to secondaries with the manager's rights.
func overrideWebhook(o ConfigOptions) admissionregistrationv1.MutatingWebhook {
	w := replicatorWebhook(o)
	w.Name = "overrides.flotilla.dev"
	w.ClientConfig = o.clientConfig(OverridePath)
	w.Rules[0].Resources = []string{"overrides"}
	return w
}

// clientConfig is how the API server reaches the webhook served at path.
func (o ConfigOptions) clientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: o.CABundle}
	if o.URL != "" {
		u := o.URL + path
		cc.URL = &u
		return cc
	}
	port := int32(443)
	cc.Service = &admissionregistrationv1.ServiceReference{Namespace: o.Namespace, Name: o.Service, Path: &path, Port: &port}
	return cc
}
