package pki_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/pkg/pki"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testSpec() pki.BundleSpec {
	return pki.BundleSpec{
		CACommonName:     "web-ca",
		ClientCommonName: "web-client",
		Hosts:            []string{"b.example.com", "a.example.com", "*.apps.example.com"},
	}
}

func TestEnsureBundleIssuesEverythingFromNothing(t *testing.T) {
	spec := testSpec()
	b, changed := ensure(t, pki.StoredFrom(nil, nil, nil), spec, t0)
	if !changed {
		t.Error("a fresh bundle is not reported as changed")
	}
	wantKeys(t, "CA Secret", b.CASecretData(), "ca.crt", "ca.key")
	wantKeys(t, "ca-secret", b.ServerSecretData(), "ca.crt", "tls.crt", "tls.key")
	wantKeys(t, "cli-secret", b.ClientSecretData(), "client.crt", "client.key")
	if !bytes.Equal(b.ServerSecretData()["ca.crt"], b.CA.CertPEM) {
		t.Error("without a rotation, ca-secret's ca.crt is the CA certificate alone")
	}
	checkUsable(t, b, spec, t0)
	// A wildcard host covers its subdomains as TLS clients match them.
	if err := verifyLeaf(b.Server.CertPEM, b.CABundlePEM(), "x.apps.example.com", x509.ExtKeyUsageServerAuth, t0); err != nil {
		t.Errorf("wildcard host: %v", err)
	}
	if got := cert(t, b.Client.CertPEM).Subject.CommonName; got != "web-client" {
		t.Errorf("client CN = %q", got)
	}
	if got := cert(t, b.CA.CertPEM).NotAfter; !got.Equal(t0.Add(pki.CAValidity)) {
		t.Errorf("CA expires %v, want %v", got, t0.Add(pki.CAValidity))
	}
	if !b.Server.NotAfter.Equal(t0.Add(pki.LeafValidity)) || !b.Client.NotAfter.Equal(t0.Add(pki.LeafValidity)) {
		t.Errorf("leaves expire %v and %v, want %v", b.Server.NotAfter, b.Client.NotAfter, t0.Add(pki.LeafValidity))
	}
}

// The Ingress rejects a server certificate presented as a client one and vice versa, so the leaves
// must carry exactly their own extended key usage.
func TestLeavesCarryTheirOwnExtendedKeyUsage(t *testing.T) {
	b, _ := ensure(t, pki.StoredTLS{}, testSpec(), t0)
	leaves := []struct {
		name         string
		certPEM      []byte
		want, denied x509.ExtKeyUsage
	}{
		{"server", b.Server.CertPEM, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		{"client", b.Client.CertPEM, x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	for _, l := range leaves {
		t.Run(l.name, func(t *testing.T) {
			if got := cert(t, l.certPEM).ExtKeyUsage; !slices.Equal(got, []x509.ExtKeyUsage{l.want}) {
				t.Errorf("ExtKeyUsage = %v, want [%v]", got, l.want)
			}
			if err := verifyLeaf(l.certPEM, b.CABundlePEM(), "", l.denied, t0); err == nil {
				t.Errorf("verified for usage %v", l.denied)
			}
		})
	}
}

func TestEnsureBundleIsIdempotent(t *testing.T) {
	withIPs := testSpec()
	withIPs.Hosts = append(withIPs.Hosts, "10.0.0.1", "::1")
	sameIPsWrittenDifferently := withIPs
	sameIPsWrittenDifferently.Hosts = append(slices.Clone(testSpec().Hosts), "0:0::1", "10.0.0.1")
	cases := map[string]struct{ first, second pki.BundleSpec }{
		"DNS hosts": {testSpec(), testSpec()},
		"IP hosts":  {withIPs, sameIPsWrittenDifferently},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			first, _ := ensure(t, pki.StoredTLS{}, c.first, t0)
			second, changed := ensure(t, storedOf(first), c.second, t0.Add(24*time.Hour))
			if changed {
				t.Error("a second call with nothing stale reports a change")
			}
			for secret, data := range map[string]func(pki.TLSBundle) map[string][]byte{
				"CA Secret": pki.TLSBundle.CASecretData, "ca-secret": pki.TLSBundle.ServerSecretData, "cli-secret": pki.TLSBundle.ClientSecretData,
			} {
				if !reflect.DeepEqual(data(first), data(second)) {
					t.Errorf("%s changed on a second call", secret)
				}
			}
			checkUsable(t, second, c.second, t0.Add(24*time.Hour))
		})
	}
}

// Each case starts from a bundle issued at t0, damages or changes one input, and says which parts
// must be replaced; everything else must be kept byte for byte.
func TestEnsureBundleReplacesOnlyWhatIsStale(t *testing.T) {
	foreign, err := pki.NewCA("foreign", t0, pki.CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	foreignServer, err := foreign.IssueServer(testSpec().Hosts, nil, t0, pki.LeafValidity)
	if err != nil {
		t.Fatal(err)
	}
	leafRenewal := t0.Add(pki.LeafValidity * 2 / 3)
	type want struct {
		changed, ca, server, client bool
		previousIsOldCA             bool
		notCovered                  []string
	}
	cases := []struct {
		name   string
		spec   func(*pki.BundleSpec)
		stored func(*pki.StoredTLS, pki.TLSBundle)
		at     time.Time
		want   want
	}{
		{name: "nothing stale a day later", at: t0.Add(24 * time.Hour)},
		{name: "hosts reordered, in another case and repeated",
			spec: func(s *pki.BundleSpec) {
				s.Hosts = []string{"A.example.com", "*.apps.example.com", "b.example.com", "a.example.com", ""}
			}},
		{name: "a host added",
			spec: func(s *pki.BundleSpec) { s.Hosts = append(s.Hosts, "c.example.com") },
			want: want{changed: true, server: true}},
		{name: "an IP host added",
			spec: func(s *pki.BundleSpec) { s.Hosts = append(s.Hosts, "10.0.0.1") },
			want: want{changed: true, server: true}},
		{name: "a host removed",
			spec: func(s *pki.BundleSpec) { s.Hosts = []string{"a.example.com"} },
			want: want{changed: true, server: true, notCovered: []string{"b.example.com", "x.apps.example.com"}}},
		{name: "client CN changed",
			spec: func(s *pki.BundleSpec) { s.ClientCommonName = "someone-else" },
			want: want{changed: true, client: true}},
		{name: "CA name changed does not rotate the CA",
			spec: func(s *pki.BundleSpec) { s.CACommonName = "renamed" }},
		{name: "leaves just before two thirds of their life", at: leafRenewal.Add(-time.Hour)},
		{name: "leaves past two thirds of their life", at: leafRenewal.Add(time.Hour),
			want: want{changed: true, server: true, client: true}},
		{name: "server certificate garbage",
			stored: func(s *pki.StoredTLS, _ pki.TLSBundle) { s.ServerCert = []byte("garbage") },
			want:   want{changed: true, server: true}},
		{name: "server certificate truncated",
			stored: func(s *pki.StoredTLS, _ pki.TLSBundle) { s.ServerCert = s.ServerCert[:len(s.ServerCert)/2] },
			want:   want{changed: true, server: true}},
		{name: "server key of another certificate",
			stored: func(s *pki.StoredTLS, b pki.TLSBundle) { s.ServerKey = b.Client.KeyPEM },
			want:   want{changed: true, server: true}},
		{name: "ca-secret missing",
			stored: func(s *pki.StoredTLS, _ pki.TLSBundle) { s.ServerCert, s.ServerKey = nil, nil },
			want:   want{changed: true, server: true}},
		{name: "server certificate signed by a foreign CA",
			stored: func(s *pki.StoredTLS, _ pki.TLSBundle) {
				s.ServerCert, s.ServerKey = foreignServer.CertPEM, foreignServer.KeyPEM
			},
			want: want{changed: true, server: true}},
		{name: "client certificate garbage",
			stored: func(s *pki.StoredTLS, _ pki.TLSBundle) {
				s.ClientCert = []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
			},
			want: want{changed: true, client: true}},
		{name: "server pair stored as the client pair",
			stored: func(s *pki.StoredTLS, b pki.TLSBundle) { s.ClientCert, s.ClientKey = b.Server.CertPEM, b.Server.KeyPEM },
			want:   want{changed: true, client: true}},
		{name: "CA certificate garbage",
			stored: func(s *pki.StoredTLS, _ pki.TLSBundle) { s.CACert = []byte("garbage") },
			want:   want{changed: true, ca: true, server: true, client: true}},
		{name: "CA key of another CA keeps the old certificate trusted",
			stored: func(s *pki.StoredTLS, _ pki.TLSBundle) { s.CAKey = foreign.KeyPEM },
			want:   want{changed: true, ca: true, server: true, client: true, previousIsOldCA: true}},
		{name: "CA certificate and key of a leaf",
			stored: func(s *pki.StoredTLS, b pki.TLSBundle) { s.CACert, s.CAKey = b.Server.CertPEM, b.Server.KeyPEM },
			want:   want{changed: true, ca: true, server: true, client: true}},
		{name: "everything expired (the controller was down for longer than the CA's life)",
			at:   t0.Add(pki.CAValidity + time.Hour),
			want: want{changed: true, ca: true, server: true, client: true}},
		{name: "CA Secret missing",
			stored: func(s *pki.StoredTLS, _ pki.TLSBundle) { s.CACert, s.CAKey = nil, nil },
			want:   want{changed: true, ca: true, server: true, client: true}},
		{name: "garbage previous CA dropped",
			stored: func(s *pki.StoredTLS, _ pki.TLSBundle) { s.PreviousCACert = []byte("garbage") },
			want:   want{changed: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			first, _ := ensure(t, pki.StoredTLS{}, testSpec(), t0)
			spec, stored, at := testSpec(), storedOf(first), c.at
			if c.spec != nil {
				c.spec(&spec)
			}
			if c.stored != nil {
				c.stored(&stored, first)
			}
			if at.IsZero() {
				at = t0.Add(time.Hour)
			}
			got, changed := ensure(t, stored, spec, at)
			if changed != c.want.changed {
				t.Errorf("changed = %v, want %v", changed, c.want.changed)
			}
			replaced(t, "CA", first.CA.CertPEM, got.CA.CertPEM, c.want.ca)
			replaced(t, "server certificate", first.Server.CertPEM, got.Server.CertPEM, c.want.server)
			replaced(t, "client certificate", first.Client.CertPEM, got.Client.CertPEM, c.want.client)
			if c.want.previousIsOldCA != bytes.Equal(got.PreviousCACertPEM, first.CA.CertPEM) {
				t.Errorf("previous CA = %q, want the old CA: %v", got.PreviousCACertPEM, c.want.previousIsOldCA)
			}
			if !c.want.previousIsOldCA && len(got.PreviousCACertPEM) > 0 {
				t.Errorf("unexpected previous CA %q", got.PreviousCACertPEM)
			}
			checkUsable(t, got, spec, at)
			if pki.Covers(got.Server.CertPEM, c.want.notCovered) && len(c.want.notCovered) > 0 {
				t.Errorf("the server certificate still covers removed hosts %v", c.want.notCovered)
			}
		})
	}
}

// The CA's life, one step at a time: renewal at two thirds of its life, an overlap during which both
// CAs are trusted, and the previous CA dropped when it expires.
func TestCARotationTrustsBothCAsUntilThePreviousExpires(t *testing.T) {
	spec := testSpec()
	first, _ := ensure(t, pki.StoredTLS{}, spec, t0)
	oldCA := cert(t, first.CA.CertPEM)
	rotation := oldCA.NotBefore.Add(oldCA.NotAfter.Sub(oldCA.NotBefore) * 2 / 3)

	before, _ := ensure(t, storedOf(first), spec, rotation.Add(-time.Hour))
	replaced(t, "CA before its renewal", first.CA.CertPEM, before.CA.CertPEM, false)

	rotated, changed := ensure(t, storedOf(before), spec, rotation.Add(time.Hour))
	if !changed {
		t.Fatal("CA renewal not reported as changed")
	}
	replaced(t, "CA at its renewal", first.CA.CertPEM, rotated.CA.CertPEM, true)
	if !bytes.Equal(rotated.PreviousCACertPEM, first.CA.CertPEM) || !bytes.Equal(rotated.CASecretData()["previous-ca.crt"], first.CA.CertPEM) {
		t.Error("the previous CA is not kept")
	}
	wantKeys(t, "CA Secret during the overlap", rotated.CASecretData(), "ca.crt", "ca.key", "previous-ca.crt")
	wantBundle := slices.Concat(rotated.CA.CertPEM, first.CA.CertPEM)
	if got := rotated.ServerSecretData()["ca.crt"]; !bytes.Equal(got, wantBundle) || !bytes.Equal(rotated.CABundlePEM(), wantBundle) {
		t.Errorf("ca.crt during the overlap is not the new then the previous CA certificate:\n%s", got)
	}
	now := rotation.Add(time.Hour)
	checkUsable(t, rotated, spec, now)
	for name, leaf := range map[string][]byte{"server": rotated.Server.CertPEM, "client": rotated.Client.CertPEM} {
		if !pki.SignedBy(leaf, rotated.CA.CertPEM) || pki.SignedBy(leaf, first.CA.CertPEM) {
			t.Errorf("the new %s certificate is not signed by the new CA only", name)
		}
	}
	// A client still presenting the certificate of the previous CA is accepted during the overlap...
	if err := verifyLeaf(before.Client.CertPEM, rotated.CABundlePEM(), "", x509.ExtKeyUsageClientAuth, now); err != nil {
		t.Errorf("the old client certificate is rejected during the overlap: %v", err)
	}
	// ...and the new one is not accepted by the previous CA alone, which is why both are trusted.
	if verifyLeaf(rotated.Client.CertPEM, first.CA.CertPEM, "", x509.ExtKeyUsageClientAuth, now) == nil {
		t.Error("the new client certificate verifies against the previous CA")
	}

	overlap, _ := ensure(t, storedOf(rotated), spec, oldCA.NotAfter.Add(-time.Hour))
	if !bytes.Equal(overlap.PreviousCACertPEM, first.CA.CertPEM) {
		t.Error("the previous CA was dropped before it expired")
	}
	after, changed := ensure(t, storedOf(overlap), spec, oldCA.NotAfter)
	if !changed || len(after.PreviousCACertPEM) > 0 || !bytes.Equal(after.CABundlePEM(), after.CA.CertPEM) {
		t.Errorf("the expired previous CA is kept (changed=%v):\n%s", changed, after.CABundlePEM())
	}
	replaced(t, "CA when the previous one expires", overlap.CA.CertPEM, after.CA.CertPEM, false)
	wantKeys(t, "CA Secret after the overlap", after.CASecretData(), "ca.crt", "ca.key")
}

// Driven every ten days over two CA lifetimes, the stored material is always valid, and EnsureBundle
// changes it exactly when RenewAt said it would.
func TestEnsureBundleNeverLetsCertificatesExpire(t *testing.T) {
	spec := testSpec()
	b, _ := ensure(t, pki.StoredTLS{}, spec, t0)
	rotations := 0
	for now := t0; now.Before(t0.Add(2*pki.CAValidity + pki.LeafValidity)); now = now.Add(10 * 24 * time.Hour) {
		next, changed := ensure(t, storedOf(b), spec, now)
		if due := !now.Before(b.RenewAt()); changed != due {
			t.Fatalf("at %v: changed = %v, but RenewAt %v", now, changed, b.RenewAt())
		}
		if !bytes.Equal(next.CA.CertPEM, b.CA.CertPEM) {
			rotations++
		}
		checkUsable(t, next, spec, now)
		b = next
	}
	if rotations != 3 {
		t.Errorf("%d CA rotations in 11 years, want 3 (every 3.3 years)", rotations)
	}
}

func TestRenewAtIsWhenEnsureBundleActs(t *testing.T) {
	b, _ := ensure(t, pki.StoredTLS{}, testSpec(), t0)
	at := b.RenewAt()
	if at.Before(t0.Add(pki.LeafValidity/2)) || at.After(t0.Add(pki.LeafValidity)) {
		t.Fatalf("RenewAt = %v, want two thirds into the leaves' year", at)
	}
	if _, changed := ensure(t, storedOf(b), testSpec(), at.Add(-time.Second)); changed {
		t.Error("changed a second before RenewAt")
	}
	if _, changed := ensure(t, storedOf(b), testSpec(), at); !changed {
		t.Error("unchanged at RenewAt")
	}
}

func TestEnsureBundleRefusesToIssueWithoutHosts(t *testing.T) {
	for name, hosts := range map[string][]string{"nil": nil, "empty": {}, "blank": {"", "  "}} {
		t.Run(name, func(t *testing.T) {
			spec := testSpec()
			spec.Hosts = hosts
			if _, _, err := pki.EnsureBundle(pki.StoredTLS{}, spec, t0); !errors.Is(err, pki.ErrNoHosts) {
				t.Errorf("err = %v, want ErrNoHosts", err)
			}
		})
	}
}

func TestCoversAndSignedBy(t *testing.T) {
	b, _ := ensure(t, pki.StoredTLS{}, testSpec(), t0)
	foreign, err := pki.NewCA("foreign", t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	covers := []struct {
		name  string
		hosts []string
		want  bool
	}{
		{"every host", testSpec().Hosts, true},
		{"a subdomain of the wildcard", []string{"x.apps.example.com"}, true},
		{"two levels below the wildcard", []string{"a.b.apps.example.com"}, false},
		{"one host missing", []string{"a.example.com", "c.example.com"}, false},
		{"no host", nil, true},
	}
	for _, c := range covers {
		if got := pki.Covers(b.Server.CertPEM, c.hosts); got != c.want {
			t.Errorf("Covers %s = %v, want %v", c.name, got, c.want)
		}
	}
	if pki.Covers([]byte("garbage"), nil) {
		t.Error("garbage covers something")
	}
	signed := []struct {
		name     string
		leaf, ca []byte
		want     bool
	}{
		{"server by its CA", b.Server.CertPEM, b.CA.CertPEM, true},
		{"client by its CA", b.Client.CertPEM, b.CA.CertPEM, true},
		{"server by a foreign CA", b.Server.CertPEM, foreign.CertPEM, false},
		{"garbage", []byte("garbage"), b.CA.CertPEM, false},
		{"by garbage", b.Server.CertPEM, []byte("garbage"), false},
	}
	for _, c := range signed {
		if got := pki.SignedBy(c.leaf, c.ca); got != c.want {
			t.Errorf("SignedBy %s = %v, want %v", c.name, got, c.want)
		}
	}
}

func ensure(t *testing.T, stored pki.StoredTLS, spec pki.BundleSpec, now time.Time) (pki.TLSBundle, bool) {
	t.Helper()
	b, changed, err := pki.EnsureBundle(stored, spec, now)
	if err != nil {
		t.Fatalf("EnsureBundle at %v: %v", now, err)
	}
	return b, changed
}

// storedOf is what a controller reads back after writing the bundle's Secrets.
func storedOf(b pki.TLSBundle) pki.StoredTLS {
	return pki.StoredFrom(b.CASecretData(), b.ServerSecretData(), b.ClientSecretData())
}

// checkUsable asserts what the Ingress and its clients rely on at now: the server certificate
// verifies for every host and the client certificate as a client, both against ca-secret's ca.crt,
// and each private key belongs to its certificate.
func checkUsable(t *testing.T, b pki.TLSBundle, spec pki.BundleSpec, now time.Time) {
	t.Helper()
	roots := b.ServerSecretData()["ca.crt"]
	for _, host := range spec.Hosts {
		if host == "" {
			continue
		}
		if err := verifyLeaf(b.Server.CertPEM, roots, host, x509.ExtKeyUsageServerAuth, now); err != nil {
			t.Errorf("server certificate for %q at %v: %v", host, now, err)
		}
	}
	if err := verifyLeaf(b.Client.CertPEM, roots, "", x509.ExtKeyUsageClientAuth, now); err != nil {
		t.Errorf("client certificate at %v: %v", now, err)
	}
	if _, err := tls.X509KeyPair(b.Server.CertPEM, b.Server.KeyPEM); err != nil {
		t.Errorf("server pair: %v", err)
	}
	if _, err := tls.X509KeyPair(b.Client.CertPEM, b.Client.KeyPEM); err != nil {
		t.Errorf("client pair: %v", err)
	}
}

func verifyLeaf(leafPEM, rootsPEM []byte, host string, usage x509.ExtKeyUsage, now time.Time) error {
	b, _ := pem.Decode(leafPEM)
	if b == nil {
		return errors.New("leaf is not PEM")
	}
	leaf, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(rootsPEM) {
		return errors.New("no root certificate")
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

func cert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatal("not PEM")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func replaced(t *testing.T, what string, before, after []byte, want bool) {
	t.Helper()
	if got := !bytes.Equal(before, after); got != want {
		t.Errorf("%s replaced = %v, want %v", what, got, want)
	}
}

func wantKeys(t *testing.T, name string, data map[string][]byte, keys ...string) {
	t.Helper()
	if got := slices.Sorted(maps.Keys(data)); !slices.Equal(got, keys) {
		t.Errorf("%s keys = %v, want %v", name, got, keys)
	}
	for k, v := range data {
		if len(v) == 0 {
			t.Errorf("%s[%s] is empty", name, k)
		}
	}
}
