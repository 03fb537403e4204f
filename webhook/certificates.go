package webhook

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/flotilla-dev/flotilla/internal/clocks"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/pki"
)

// Certificates keeps the webhook's CA (shared by replicas, in a Secret of flotilla-system), this
// replica's serving certificate (files in CertDir, reloaded by the webhook and metrics servers),
// the MutatingWebhookConfiguration's caBundle, and the CA's certificate published for the other
// clients of that serving certificate (the metrics' scrapers).
type Certificates struct {
	Client   client.Client
	CertDir  string
	DNSNames []string
	IPs      []net.IP
	Config   ConfigOptions
	// SecretName holds the CA in flotilla-system.
	SecretName string
	// CAConfigMapName is the ConfigMap of flotilla-system where the CA's certificate (never its
	// key) is published, key ca.crt, for scrapers to verify the metrics endpoint with; "":
	// published nowhere. With cert-manager it is the ca.crt cert-manager mounted, when there is one.
	CAConfigMapName string
	// Clock tells the time of renewals (default: the real one).
	Clock clock.PassiveClock
}

const (
	caValidity      = 5 * 365 * 24 * time.Hour
	servingValidity = 90 * 24 * time.Hour
	// renewalCheck is how often a replica checks whether its serving certificate is due.
	renewalCheck = time.Hour
)

var _ manager.Runnable = (*Certificates)(nil)
var _ manager.LeaderElectionRunnable = (*Certificates)(nil)

// NeedLeaderElection says no: every replica serves the webhook with a certificate of its own.
func (c *Certificates) NeedLeaderElection() bool { return false }

// Start renews this replica's serving certificate (and re-applies the configuration) until ctx
// ends. Ensure must have succeeded once before the webhook server starts.
func (c *Certificates) Start(ctx context.Context) error {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.Ensure(ctx); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Renewing the webhook's certificate failed")
		}
	}, renewalCheck)
	return nil
}

func (c *Certificates) now() time.Time { return clocks.Now(c.Clock) }

// Ensure makes the CA, a serving certificate (renewed at two thirds of its life) and the webhook
// configuration exist. It is called before the webhook server starts and then periodically.
func (c *Certificates) Ensure(ctx context.Context) error {
	if c.Config.CAInjectedFrom != "" {
		// cert-manager's: the serving certificate is its Secret, mounted in CertDir (and reloaded
		// by the webhook server when cert-manager renews it); the caBundle is its CA injector's.
		if _, err := os.Stat(filepath.Join(c.CertDir, "tls.crt")); err != nil {
			return fmt.Errorf("the webhook's serving certificate from %s: %w", c.Config.CAInjectedFrom, err)
		}
		// An issuer that names no CA (an ACME one) leaves no ca.crt: nothing to publish then, and
		// scrapers need a tlsConfig of their own.
		if caPEM, err := os.ReadFile(filepath.Join(c.CertDir, "ca.crt")); err == nil && len(caPEM) > 0 {
			if err := c.publishCA(ctx, caPEM); err != nil {
				return err
			}
		}
		return c.ensureConfiguration(ctx, nil)
	}
	now := c.now()
	ca, err := c.ensureCA(ctx, now)
	if err != nil {
		return err
	}
	if err := c.publishCA(ctx, ca.CertPEM); err != nil {
		return err
	}
	certFile := filepath.Join(c.CertDir, "tls.crt")
	// Kept only while the CA in the Secret still signs it: a CA replaced meanwhile (the Secret
	// deleted by an uninstall, then a reinstall) would otherwise be published as the caBundle of a
	// certificate it never signed, and every elected pod's admission would fail TLS. And only while
	// it names every name asked for (a name added since, the metrics Service's, is served at once).
	if current, err := os.ReadFile(certFile); err == nil && pki.SignedBy(current, ca.CertPEM) && pki.Covers(current, c.DNSNames) {
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

// publishCA writes the CA's certificate to the ConfigMap CAConfigMapName: public, so readable by
// whoever scrapes (a Prometheus Operator's ServiceMonitor names it in its tlsConfig), where the
// CA's Secret, which holds its key, must stay readable by the manager alone.
func (c *Certificates) publishCA(ctx context.Context, caPEM []byte) error {
	if c.CAConfigMapName == "" {
		return nil
	}
	err := createOrUpdateRacing(ctx, c.Client, func() *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: c.CAConfigMapName}}
	}, func(cm *corev1.ConfigMap) error {
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Labels["app.kubernetes.io/part-of"] = "flotilla"
		cm.Data = map[string]string{CAConfigMapKey: string(caPEM)}
		return nil
	})
	if err != nil {
		return fmt.Errorf("publishing the CA's certificate in ConfigMap %s/%s: %w", flotillav1.SystemNamespace, c.CAConfigMapName, err)
	}
	return nil
}

// CAConfigMapKey is the key of the CA's certificate in the ConfigMap CAConfigMapName.
const CAConfigMapKey = "ca.crt"

func (c *Certificates) ensureConfiguration(ctx context.Context, caPEM []byte) error {
	opts := c.Config
	opts.CABundle = caPEM
	want := Configuration(opts)
	err := createOrUpdateRacing(ctx, c.Client, func() *admissionregistrationv1.MutatingWebhookConfiguration {
		return &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: want.Name}}
	}, func(cfg *admissionregistrationv1.MutatingWebhookConfiguration) error {
		cfg.Labels = want.Labels
		cfg.Annotations = keepInjection(cfg.Annotations, opts.CAInjectedFrom)
		cfg.Webhooks = withInjectedCA(want.Webhooks, cfg.Webhooks, opts.CAInjectedFrom != "")
		return nil
	})
	if err != nil {
		return fmt.Errorf("applying the MutatingWebhookConfiguration: %w", err)
	}
	return nil
}

// createOrUpdateRacing is CreateOrUpdate for an object every replica writes at start: two starting
// together (a rollout, a fresh install) race, and the loser's conflict or AlreadyExists is retried
// against the winner's version rather than failing its start (seen as a restart of one of the
// chart's two pods). Each try starts from a fresh object, so nothing the lost try read or set
// leaks into the next.
func createOrUpdateRacing[T client.Object](ctx context.Context, cl client.Client, fresh func() T, mutate func(T) error) error {
	return retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error {
		obj := fresh()
		_, err := controllerutil.CreateOrUpdate(ctx, cl, obj, func() error { return mutate(obj) })
		return err
	})
}

// keepInjection sets or removes cert-manager's inject-ca-from annotation, leaving the others.
func keepInjection(annotations map[string]string, from string) map[string]string {
	if from == "" {
		delete(annotations, flotillav1.AnnotationInjectCAFrom)
		return annotations
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[flotillav1.AnnotationInjectCAFrom] = from
	return annotations
}

// withInjectedCA keeps, when cert-manager injects the CA, the caBundle it wrote into each webhook:
// the manager re-applies the configuration at every start and renewal check, and an update without
// it would break every elected pod's admission until cainjector wrote it again.
func withInjectedCA(want, current []admissionregistrationv1.MutatingWebhook, injected bool) []admissionregistrationv1.MutatingWebhook {
	if !injected {
		return want
	}
	bundles := map[string][]byte{}
	for _, w := range current {
		bundles[w.Name] = w.ClientConfig.CABundle
	}
	out := make([]admissionregistrationv1.MutatingWebhook, len(want))
	for i, w := range want {
		w.ClientConfig.CABundle = bundles[w.Name]
		out[i] = w
	}
	return out
}
