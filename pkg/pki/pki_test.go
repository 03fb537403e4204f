package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"testing"
	"time"
)

func TestServerAndClientCertificatesVerifyAgainstTheirCA(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("flotilla-test", now, 365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.IssueServer([]string{"a.example.com", "b.example.com"}, []net.IP{net.ParseIP("127.0.0.1")}, now, 90*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.IssueClient("someone", now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.CertPEM) {
		t.Fatal("CA PEM not accepted")
	}
	for _, host := range []string{"a.example.com", "b.example.com", "127.0.0.1"} {
		verify(t, server.CertPEM, x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	}
	verify(t, client.CertPEM, x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if _, err := tls.X509KeyPair(server.CertPEM, server.KeyPEM); err != nil {
		t.Errorf("server pair unusable: %v", err)
	}

	other, err := NewCA("other", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	otherPool := x509.NewCertPool()
	otherPool.AppendCertsFromPEM(other.CertPEM)
	b, _ := pem.Decode(server.CertPEM)
	c, _ := x509.ParseCertificate(b.Bytes)
	if _, err := c.Verify(x509.VerifyOptions{Roots: otherPool, DNSName: "a.example.com"}); err == nil {
		t.Error("a certificate verified against a foreign CA")
	}
	if _, err := ca.IssueServer(nil, nil, now, time.Hour); err == nil {
		t.Error("a server certificate without names was issued")
	}
}

func TestLoadCAAndLifetimes(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("x", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadCA(ca.CertPEM, ca.KeyPEM)
	if err != nil || !loaded.Cert.Equal(ca.Cert) {
		t.Fatalf("LoadCA: %v", err)
	}
	kp, err := loaded.IssueServer([]string{"s"}, nil, now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !kp.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("certificate outlives its CA: %v > %v", kp.NotAfter, ca.Cert.NotAfter)
	}
	if na, err := NotAfter(kp.CertPEM); err != nil || !na.Equal(kp.NotAfter) {
		t.Errorf("NotAfter = %v, %v", na, err)
	}
	start := now
	end := now.Add(3 * time.Hour)
	if RenewalDue(now.Add(time.Hour), start, end) || !RenewalDue(now.Add(2*time.Hour), start, end) {
		t.Error("renewal is due at two thirds of the lifetime")
	}
}

func verify(t *testing.T, certPEM []byte, opts x509.VerifyOptions) {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Verify(opts); err != nil {
		t.Errorf("verify %v: %v", opts.DNSName, err)
	}
}
