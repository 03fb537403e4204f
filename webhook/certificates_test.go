package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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

// The CA's certificate is published in a ConfigMap (never its key) and verifies the serving
// certificate for every name it was asked for, the metrics Service's included: what a
// ServiceMonitor's tlsConfig names. A name added since the certificate was issued gets a new one.
func TestEnsurePublishesTheCAThatVerifiesTheServedNames(t *testing.T) {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	c := fake.NewClientBuilder().WithScheme(s).Build()
	names := flotillav1.NamesFrom("fleet")
	certs := &Certificates{Client: c, CertDir: t.TempDir(), SecretName: names.WebhookCASecret, CAConfigMapName: names.CAConfigMap,
		DNSNames: []string{"fleet-webhook.flotilla-system.svc"}, Config: ConfigOptions{Name: names.WebhookConfiguration, URL: "https://127.0.0.1:9443"}}
	if err := certs.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	metrics := "fleet-manager-metrics.flotilla-system.svc"
	certs.DNSNames = append(certs.DNSNames, metrics)
	if err := certs.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: "fleet-ca"}, &cm); err != nil {
		t.Fatalf("the CA's certificate is not published: %v", err)
	}
	if len(cm.Data) != 1 || !strings.Contains(cm.Data[CAConfigMapKey], "BEGIN CERTIFICATE") {
		t.Fatalf("ConfigMap data %v: want the CA's certificate alone, under %s", cm.Data, CAConfigMapKey)
	}
	served, err := tls.LoadX509KeyPair(filepath.Join(certs.CertDir, "tls.crt"), filepath.Join(certs.CertDir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(served.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(cm.Data[CAConfigMapKey])) {
		t.Fatal("the published certificate does not parse")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: metrics}); err != nil {
		t.Fatalf("a scraper of %s cannot verify the served certificate with the published CA: %v", metrics, err)
	}
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := c.Get(t.Context(), client.ObjectKey{Name: "fleet"}, &cfg); err != nil {
		t.Fatalf("the webhook configuration is not named from the prefix: %v", err)
	}
}

// With cert-manager, the ca.crt cert-manager mounted is what is published.
func TestEnsurePublishesCertManagersCA(t *testing.T) {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	c := fake.NewClientBuilder().WithScheme(s).Build()
	dir := t.TempDir()
	for file, content := range map[string]string{"tls.crt": "serving", "ca.crt": "cert-manager's CA"} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	certs := &Certificates{Client: c, CertDir: dir, SecretName: flotillav1.WebhookCASecretName, CAConfigMapName: "flotilla-ca",
		Config: ConfigOptions{Service: "flotilla-webhook", Namespace: flotillav1.SystemNamespace, CAInjectedFrom: "flotilla-system/flotilla-webhook"}}
	if err := certs.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: "flotilla-ca"}, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data[CAConfigMapKey] != "cert-manager's CA" {
		t.Fatalf("published %q, want the mounted ca.crt", cm.Data[CAConfigMapKey])
	}
}

// Two replicas starting together race to create the configuration and the CA's ConfigMap: the
// loser's AlreadyExists, then its conflict with the winner's update, are retried against the
// winner's version and end with what this replica wants, rather than failing its start.
func TestEnsureWinsARaceWithAnotherReplica(t *testing.T) {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	base := fake.NewClientBuilder().WithScheme(s).Build()
	raced := map[string]int{}
	// The CA's Secret has its own way through the race (the loser reads the winner's CA).
	racing := func(obj client.Object) bool {
		switch obj.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration, *corev1.ConfigMap:
			return true
		}
		return false
	}
	c := interceptor.NewClient(base, interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			kind := fmt.Sprintf("%T", obj)
			if raced[kind] > 0 || !racing(obj) {
				return cl.Create(ctx, obj, opts...)
			}
			raced[kind]++
			// The other replica wins the create, with what its (older) flags say.
			winner := obj.DeepCopyObject().(client.Object)
			winner.SetLabels(map[string]string{"written-by": "the-other-replica"})
			if err := cl.Create(ctx, winner, opts...); err != nil {
				return err
			}
			return apierrors.NewAlreadyExists(schema.GroupResource{}, obj.GetName())
		},
		Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			kind := fmt.Sprintf("%T", obj)
			if raced[kind] > 1 || !racing(obj) {
				return cl.Update(ctx, obj, opts...)
			}
			raced[kind]++
			return apierrors.NewConflict(schema.GroupResource{}, obj.GetName(), errors.New("the other replica updated it first"))
		},
	})
	certs := &Certificates{Client: c, CertDir: t.TempDir(), SecretName: flotillav1.WebhookCASecretName, CAConfigMapName: "flotilla-ca",
		DNSNames: []string{"localhost"}, Config: ConfigOptions{URL: "https://127.0.0.1:9443"}}
	if err := certs.Ensure(t.Context()); err != nil {
		t.Fatalf("Ensure lost the race: %v", err)
	}
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := base.Get(t.Context(), client.ObjectKey{Name: flotillav1.WebhookConfigurationName}, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Labels["written-by"] != "" || len(cfg.Webhooks) == 0 || len(cfg.Webhooks[0].ClientConfig.CABundle) == 0 {
		t.Errorf("configuration after the race: labels %v, %d webhooks; want this replica's, with its caBundle", cfg.Labels, len(cfg.Webhooks))
	}
	var cm corev1.ConfigMap
	if err := base.Get(t.Context(), client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: "flotilla-ca"}, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data[CAConfigMapKey] == "" || cm.Labels["app.kubernetes.io/part-of"] != "flotilla" {
		t.Errorf("CA ConfigMap after the race: labels %v, data %v", cm.Labels, cm.Data)
	}
	if len(raced) != 2 {
		t.Errorf("raced %v; want the configuration and the ConfigMap", raced)
	}
	for kind, n := range raced {
		if n != 2 {
			t.Errorf("%s: raced %d times, want a lost create and a lost update", kind, n)
		}
	}
}
