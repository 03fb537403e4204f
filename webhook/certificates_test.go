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
		if err := c.Get(t.Context(), client.ObjectKey{Name: ConfigurationName}, &cfg); err != nil {
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
