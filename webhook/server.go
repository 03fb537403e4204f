package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/pki"
	"github.com/flotilla-dev/flotilla/pkg/virtualnode"
)

// Path is where the pod mutation is served.
const Path = "/mutate-v1-pod"

// ConfigurationName names the MutatingWebhookConfiguration Flotilla owns.
const ConfigurationName = "flotilla"

// Registry is what the webhook reads of the cluster registry.
type Registry interface {
	Snapshots() []clusters.Snapshot
}

// Handler serves admission requests for pods.
type Handler struct {
	Registry Registry
	Options  Options
	Decoder  admission.Decoder
}

var _ admission.Handler = (*Handler)(nil)

// Handle mutates an elected pod into a proxy, or denies it with the reason.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if err := h.Decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	out, err := Mutate(pod, ClusterViews(h.Registry.Snapshots()), h.Options)
	var rej *Rejection
	switch {
	case errors.As(err, &rej):
		log.FromContext(ctx).Info("Elected pod refused", "namespace", req.Namespace, "name", pod.GetName()+pod.GetGenerateName(), "reason", rej.Message)
		return admission.Denied(rej.Message)
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, err)
	case out == pod:
		return admission.Allowed("not elected")
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// ClusterViews turns registry snapshots into what Mutate needs.
func ClusterViews(snaps []clusters.Snapshot) []ClusterView {
	var out []ClusterView
	for _, s := range snaps {
		if !s.UsableSecondary() {
			continue
		}
		v := ClusterView{Name: s.Name, Ready: s.Status == flotillav1.ClusterRunning && s.CapacitySynced,
			Reason: s.Reason, Labels: virtualnode.Labels(s)}
		if v.Ready || s.Reason == "" {
			v.Reason = "capacity not known yet"
		}
		for _, n := range s.Capacity.Nodes {
			v.Nodes = append(v.Nodes, NodeView{Name: n.Name, Labels: n.Labels, Taints: n.Taints, Free: n.Free})
		}
		out = append(out, v)
	}
	return out
}

// ConfigOptions say how the API server reaches the webhook.
type ConfigOptions struct {
	// URL, when set, is the webhook's address (out of cluster: https://127.0.0.1:PORT).
	URL string
	// Service and Namespace name the webhook's Service otherwise (port 443).
	Service, Namespace string
	// CABundle verifies the webhook's serving certificate.
	CABundle []byte
	// AcceptAdmiralty also sends pods annotated multicluster.admiralty.io/elect.
	AcceptAdmiralty bool
}

// Configuration is the MutatingWebhookConfiguration Flotilla owns: only elected pods in enabled
// namespaces reach the webhook (matchConditions), so its outage never blocks other pods.
func Configuration(o ConfigOptions) *admissionregistrationv1.MutatingWebhookConfiguration {
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	ifNeeded := admissionregistrationv1.IfNeededReinvocationPolicy
	timeout := int32(5)
	elect := fmt.Sprintf("has(object.metadata.annotations) && '%s' in object.metadata.annotations", flotillav1.AnnotationElect)
	if o.AcceptAdmiralty {
		elect = fmt.Sprintf("has(object.metadata.annotations) && ('%s' in object.metadata.annotations || '%s' in object.metadata.annotations)",
			flotillav1.AnnotationElect, flotillav1.AnnotationAdmiraltyElect)
	}
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigurationName, Labels: map[string]string{"app.kubernetes.io/part-of": "flotilla"}},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "pods.flotilla.dev",
			ClientConfig:            o.clientConfig(Path),
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          &timeout,
			ReinvocationPolicy:      &ifNeeded,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{flotillav1.LabelEnabled: "true"}},
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: flotillav1.LabelPrimary, Operator: metav1.LabelSelectorOpDoesNotExist}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "elected", Expression: elect}},
		}, daemonSetWebhook(o)},
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

// Certificates keeps the webhook's CA (shared by replicas, in a Secret of flotilla-system), this
// replica's serving certificate (files in CertDir, reloaded by the webhook server), and the
// MutatingWebhookConfiguration's caBundle.
type Certificates struct {
	Client   client.Client
	CertDir  string
	DNSNames []string
	IPs      []net.IP
	Config   ConfigOptions
	// SecretName holds the CA in flotilla-system.
	SecretName string
}

const (
	caValidity      = 5 * 365 * 24 * time.Hour
	servingValidity = 90 * 24 * time.Hour
)

// Ensure makes the CA, a serving certificate (renewed at two thirds of its life) and the webhook
// configuration exist. It is called before the webhook server starts and then periodically.
func (c *Certificates) Ensure(ctx context.Context, now time.Time) error {
	ca, err := c.ensureCA(ctx, now)
	if err != nil {
		return err
	}
	certFile := filepath.Join(c.CertDir, "tls.crt")
	if current, err := os.ReadFile(certFile); err == nil {
		if notAfter, err := pki.NotAfter(current); err == nil && !pki.RenewalDue(now, notAfter.Add(-servingValidity), notAfter) {
			return c.ensureConfiguration(ctx, ca.CertPEM)
		}
	}
	kp, err := ca.IssueServer(c.DNSNames, c.IPs, now, servingValidity)
	if err != nil {
		return fmt.Errorf("issuing the webhook's serving certificate: %w", err)
	}
	if err := os.MkdirAll(c.CertDir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", c.CertDir, err)
	}
	// Key first: the server reloads when the certificate changes.
	if err := os.WriteFile(filepath.Join(c.CertDir, "tls.key"), kp.KeyPEM, 0o600); err != nil {
		return fmt.Errorf("writing the webhook key: %w", err)
	}
	if err := os.WriteFile(certFile, kp.CertPEM, 0o600); err != nil {
		return fmt.Errorf("writing the webhook certificate: %w", err)
	}
	return c.ensureConfiguration(ctx, ca.CertPEM)
}

func (c *Certificates) ensureCA(ctx context.Context, now time.Time) (*pki.CA, error) {
	key := client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: c.SecretName}
	var secret corev1.Secret
	err := c.Client.Get(ctx, key, &secret)
	if err == nil {
		return pki.LoadCA(secret.Data["ca.crt"], secret.Data["ca.key"])
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading the webhook CA: %w", err)
	}
	ca, err := pki.NewCA("flotilla-webhook-ca", now, caValidity)
	if err != nil {
		return nil, err
	}
	secret = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
		Labels: map[string]string{"app.kubernetes.io/part-of": "flotilla"}},
		Data: map[string][]byte{"ca.crt": ca.CertPEM, "ca.key": ca.KeyPEM}}
	if err := c.Client.Create(ctx, &secret); err != nil {
		if apierrors.IsAlreadyExists(err) { // another replica won: use its CA
			return c.ensureCA(ctx, now)
		}
		return nil, fmt.Errorf("storing the webhook CA: %w", err)
	}
	return ca, nil
}

func (c *Certificates) ensureConfiguration(ctx context.Context, caPEM []byte) error {
	opts := c.Config
	opts.CABundle = caPEM
	want := Configuration(opts)
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: want.Name}}
	_, err := controllerutil.CreateOrUpdate(ctx, c.Client, cfg, func() error {
		cfg.Labels = want.Labels
		cfg.Webhooks = want.Webhooks
		return nil
	})
	if err != nil {
		return fmt.Errorf("applying the MutatingWebhookConfiguration: %w", err)
	}
	return nil
}
