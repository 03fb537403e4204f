package kubeletapi

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"net/url"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// request is a CSR's PEM request for key, from a template.
func request(t *testing.T, key crypto.Signer, tmpl x509.CertificateRequest) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestApproveServingCSR(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	const self = "system:serviceaccount:flotilla-system:flotilla"
	good := x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:flotilla-eu", Organization: []string{"system:nodes"}},
		IPAddresses: []net.IP{net.ParseIP("10.0.0.7")}}
	csr := func(edit func(*certificatesv1.CertificateSigningRequest)) *certificatesv1.CertificateSigningRequest {
		c := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-flotilla-eu-x", UID: "csr-uid"},
			Spec: certificatesv1.CertificateSigningRequestSpec{Request: request(t, key, good), SignerName: certificatesv1.KubeletServingSignerName,
				Username: self, Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}}}
		if edit != nil {
			edit(c)
		}
		return c
	}
	withRequest := func(edit func(*x509.CertificateRequest)) func(*certificatesv1.CertificateSigningRequest) {
		return func(c *certificatesv1.CertificateSigningRequest) {
			tmpl := good
			edit(&tmpl)
			c.Spec.Request = request(t, key, tmpl)
		}
	}
	tests := []struct {
		name    string
		csr     *certificatesv1.CertificateSigningRequest
		edit    func(*ServingCSR)
		approve bool
		why     string
	}{
		{name: "its own CSR for its own node and address", csr: csr(nil), approve: true},
		{name: "RSA usages (key encipherment too)", csr: csr(func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageKeyEncipherment)
		}), approve: true},
		{name: "no CSR", why: "no CSR"},
		{name: "another CSR than the one it created", csr: csr(func(c *certificatesv1.CertificateSigningRequest) { c.UID = "someone-else" }),
			why: "not the one the manager created"},
		{name: "created by someone else", csr: csr(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Username = "system:node:worker-1" }),
			why: "not by the manager"},
		{name: "its own name unknown", csr: csr(nil), edit: func(s *ServingCSR) { s.Self = "" }, why: "not by the manager"},
		{name: "another signer", csr: csr(func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.SignerName = certificatesv1.KubeAPIServerClientSignerName
		}), why: "asks signer"},
		{name: "already denied", csr: csr(func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue}}
		}), why: "already Denied"},
		{name: "a node that is no virtual node", csr: csr(withRequest(func(r *x509.CertificateRequest) { r.Subject.CommonName = "system:node:worker-1" })),
			edit: func(s *ServingCSR) { s.Node = "worker-1" }, why: "not a virtual node"},
		{name: "another node's name in the request", csr: csr(withRequest(func(r *x509.CertificateRequest) { r.Subject.CommonName = "system:node:worker-1" })),
			why: "common name"},
		{name: "a group besides system:nodes", csr: csr(withRequest(func(r *x509.CertificateRequest) {
			r.Subject.Organization = []string{"system:nodes", "system:masters"}
		})), why: "organization"},
		{name: "an address it does not advertise", csr: csr(withRequest(func(r *x509.CertificateRequest) {
			r.IPAddresses = append(r.IPAddresses, net.ParseIP("10.9.9.9"))
		})), why: "10.9.9.9 is not one the manager advertises"},
		{name: "a DNS name", csr: csr(withRequest(func(r *x509.CertificateRequest) { r.DNSNames = []string{"kubernetes.default.svc"} })),
			why: "names other than IP addresses"},
		{name: "a URI", csr: csr(withRequest(func(r *x509.CertificateRequest) { r.URIs = []*url.URL{{Scheme: "spiffe", Host: "x"}} })),
			why: "names other than IP addresses"},
		{name: "no address", csr: csr(withRequest(func(r *x509.CertificateRequest) { r.IPAddresses = nil })), why: "no IP address"},
		{name: "a key it does not hold", csr: csr(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = request(t, other, good) }),
			why: "not for the key the manager holds"},
		{name: "client auth too", csr: csr(func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageClientAuth)
		}), why: "asks usages"},
		{name: "server auth missing", csr: csr(func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment}
		}), why: "asks usages"},
		{name: "not PEM", csr: csr(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("junk") }), why: "not a PEM"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := ServingCSR{CSR: tc.csr, UID: "csr-uid", Self: self, Key: &key.PublicKey, Node: "flotilla-eu", Addresses: []string{"10.0.0.7"}}
			if tc.edit != nil {
				tc.edit(&in)
			}
			ok, why := ApproveServingCSR(in)
			if ok != tc.approve {
				t.Fatalf("approve = %v (%s), want %v", ok, why, tc.approve)
			}
			if !ok && !strings.Contains(why, tc.why) {
				t.Errorf("reason %q, want it to say %q", why, tc.why)
			}
		})
	}
}
