package webhook

import (
	"os"
	"path/filepath"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/pki"
)

// After its CA Secret is replaced (an uninstall deleted it, a manager started again with the
// same certificate directory), the serving certificate on disk is re-issued by the new CA: the
// caBundle published and the certificate served must always match.
func TestEnsureReissuesACertificateTheCurrentCADidNotSign(t *testing.T) {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	c := fake.NewClientBuilder().WithScheme(s).Build()
	certs := &Certificates{Client: c, CertDir: t.TempDir(), SecretName: flotillav1.WebhookCASecretName,
		DNSNames: []string{"localhost"}, Config: ConfigOptions{URL: "https://127.0.0.1:9443"}}
	servedSignedByBundle := func() bool {
		t.Helper()
		var cfg admissionregistrationv1.MutatingWebhookConfiguration
		if err := c.Get(t.Context(), client.ObjectKey{Name: flotillav1.WebhookConfigurationName}, &cfg); err != nil {
			t.Fatal(err)
		}
		served, err := os.ReadFile(filepath.Join(certs.CertDir, "tls.crt"))
		if err != nil {
			t.Fatal(err)
		}
		return pki.SignedBy(served, cfg.Webhooks[0].ClientConfig.CABundle)
	}
	if err := certs.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !servedSignedByBundle() {
		t.Fatal("first Ensure: the served certificate does not chain to the caBundle")
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: flotillav1.WebhookCASecretName}}
	if err := c.Delete(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	if err := certs.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !servedSignedByBundle() {
		t.Fatal("after the CA was replaced: the served certificate does not chain to the new caBundle (admission would fail TLS)")
	}
}

// With cert-manager serving the webhook, the manager issues nothing, annotates the configuration
// for cert-manager's CA injector and, re-applying it (every start, every renewal check), keeps the
// caBundle the injector wrote: dropping it would fail every elected pod's admission until the
// injector came round again.
func TestEnsureLeavesTheCABundleToCertManagersInjector(t *testing.T) {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	c := fake.NewClientBuilder().WithScheme(s).Build()
	dir := t.TempDir()
	certs := &Certificates{Client: c, CertDir: dir, SecretName: flotillav1.WebhookCASecretName,
		Config: ConfigOptions{Service: "flotilla-webhook", Namespace: flotillav1.SystemNamespace, CAInjectedFrom: "flotilla-system/flotilla-webhook"}}
	if err := certs.Ensure(t.Context()); err == nil {
		t.Fatal("Ensure succeeded without cert-manager's certificate in the directory")
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), []byte("from cert-manager"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := certs.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := c.Get(t.Context(), client.ObjectKey{Name: flotillav1.WebhookConfigurationName}, &cfg); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Annotations[flotillav1.AnnotationInjectCAFrom]; got != "flotilla-system/flotilla-webhook" {
		t.Errorf("inject-ca-from %q", got)
	}
	for _, w := range cfg.Webhooks {
		if len(w.ClientConfig.CABundle) != 0 {
			t.Errorf("webhook %s got a caBundle from the manager", w.Name)
		}
	}
	for i := range cfg.Webhooks {
		cfg.Webhooks[i].ClientConfig.CABundle = []byte("injected by " + cfg.Webhooks[i].Name)
	}
	if err := c.Update(t.Context(), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := certs.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(t.Context(), client.ObjectKey{Name: flotillav1.WebhookConfigurationName}, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, w := range cfg.Webhooks {
		if string(w.ClientConfig.CABundle) != "injected by "+w.Name {
			t.Errorf("webhook %s caBundle %q after Ensure, want the injector's", w.Name, w.ClientConfig.CABundle)
		}
	}
	var secrets corev1.SecretList
	if err := c.List(t.Context(), &secrets); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 0 {
		t.Errorf("the manager made a CA Secret of its own: %v", secrets.Items[0].Name)
	}
}
