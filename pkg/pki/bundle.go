package pki

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"
)

// Lifetimes of a Replicator's TLS material. Replacing the CA means every client must learn a new
// ca.crt, so it lives long; leaves are replaced without anyone noticing, so they live a year.
const (
	CAValidity   = 5 * 365 * 24 * time.Hour
	LeafValidity = 365 * 24 * time.Hour
)

// Secret keys. The server and client ones are plumber's names, which existing Ingresses and
// clients read; the CA Secret is Flotilla's own.
const (
	caCertKey         = "ca.crt"
	caKeyKey          = "ca.key"
	previousCACertKey = "previous-ca.crt"
	serverCertKey     = "tls.crt"
	serverKeyKey      = "tls.key"
	clientCertKey     = "client.crt"
	clientKeyKey      = "client.key"
)

// ErrNoHosts is returned when a bundle is asked for without a host: a server certificate without a
// name verifies for nobody, so the user has to add hosts to the Ingress rules.
var ErrNoHosts = errors.New("the Ingress rules name no host for the server certificate")

// BundleSpec is what a Replicator's TLS material must cover.
type BundleSpec struct {
	// CACommonName names a CA when one is created, e.g. "<replicator>-ca". Changing it later does
	// not rotate the CA: a rename is not worth redistributing ca.crt.
	CACommonName string
	// ClientCommonName is the client certificate's CN, e.g. "<replicator>-client".
	ClientCommonName string
	// Hosts are all the hosts of the Ingress rules. Order, case and duplicates do not matter.
	Hosts []string
}

// StoredTLS is what the Secrets currently hold; any field may be empty or garbage.
type StoredTLS struct {
	CACert, CAKey, PreviousCACert []byte
	ServerCert, ServerKey         []byte
	ClientCert, ClientKey         []byte
}

// StoredFrom reads StoredTLS from the data of the CA Secret (flotilla-system/<replicator>-ca), the
// primary's ca-secret and cli-secret; a nil map stands for a missing Secret. ca.crt of ca-secret is
// not read: it is derived from the CA Secret, which is the source of truth.
func StoredFrom(caSecret, serverSecret, clientSecret map[string][]byte) StoredTLS {
	return StoredTLS{
		CACert: caSecret[caCertKey], CAKey: caSecret[caKeyKey], PreviousCACert: caSecret[previousCACertKey],
		ServerCert: serverSecret[serverCertKey], ServerKey: serverSecret[serverKeyKey],
		ClientCert: clientSecret[clientCertKey], ClientKey: clientSecret[clientKeyKey],
	}
}

// TLSBundle is a Replicator's complete TLS material, as returned by EnsureBundle. PreviousCACertPEM
// is set only during a CA rotation, until the previous CA expires.
type TLSBundle struct {
	CA                *CA
	PreviousCACertPEM []byte
	Server, Client    *KeyPair
}

// EnsureBundle returns the TLS material to store, keeping every stored part that is still good and
// (re)issuing the others; changed says whether the result differs from stored, i.e. whether the
// Secrets must be written. Unreadable stored parts are replaced rather than reported, so a damaged
// Secret heals itself; callers must therefore pass empty parts only for Secrets that are truly absent,
// never after a failed read. The rules:
//   - the CA is replaced when missing, unusable, expired or past two thirds of its life; the
//     replaced certificate becomes the previous CA, which stays in the CA bundle until it expires:
//     until then it can still vouch for client certificates it signed, after that nothing it signed
//     verifies anyway (leaves never outlive their CA), so a longer overlap would buy nothing;
//   - a leaf is replaced when unusable, not signed by the current CA, past two thirds of its life,
//     or when its names (the set of hosts, the client CN) differ from spec.
func EnsureBundle(stored StoredTLS, spec BundleSpec, now time.Time) (TLSBundle, bool, error) {
	hosts := normalizeHosts(spec.Hosts)
	if len(hosts) == 0 {
		return TLSBundle{}, false, ErrNoHosts
	}
	ca, previous, err := ensureCA(stored, spec.CACommonName, now)
	if err != nil {
		return TLSBundle{}, false, fmt.Errorf("ensuring the Replicator CA: %w", err)
	}
	server, err := ensureServer(stored, ca, hosts, now)
	if err != nil {
		return TLSBundle{}, false, err
	}
	client, err := ensureClient(stored, ca, spec.ClientCommonName, now)
	if err != nil {
		return TLSBundle{}, false, err
	}
	b := TLSBundle{CA: ca, PreviousCACertPEM: previous, Server: server, Client: client}
	return b, !b.stored().equal(stored), nil
}

// CABundlePEM is what clients and the Ingress trust: the current CA certificate, then the previous
// one during a rotation, so that certificates from either verify.
func (b TLSBundle) CABundlePEM() []byte {
	return slices.Concat(b.CA.CertPEM, b.PreviousCACertPEM) // a fresh slice: never aliases CA.CertPEM
}

// CASecretData is the data of flotilla-system/<replicator>-ca, which holds the CA key and so stays in
// the primary.
func (b TLSBundle) CASecretData() map[string][]byte {
	data := map[string][]byte{caCertKey: b.CA.CertPEM, caKeyKey: b.CA.KeyPEM}
	if len(b.PreviousCACertPEM) > 0 {
		data[previousCACertKey] = b.PreviousCACertPEM
	}
	return data
}

// ServerSecretData is the data of ca-secret, replicated to every cluster: the Ingress serves
// tls.crt/tls.key and verifies client certificates against ca.crt.
func (b TLSBundle) ServerSecretData() map[string][]byte {
	return map[string][]byte{serverCertKey: b.Server.CertPEM, serverKeyKey: b.Server.KeyPEM, caCertKey: b.CABundlePEM()}
}

// ClientSecretData is the data of cli-secret.
func (b TLSBundle) ClientSecretData() map[string][]byte {
	return map[string][]byte{clientCertKey: b.Client.CertPEM, clientKeyKey: b.Client.KeyPEM}
}

// RenewAt is the earliest instant at which EnsureBundle would change this bundle for the same spec
// (a certificate reaching two thirds of its life, the previous CA expiring), so a controller can
// requeue for it instead of polling. The zero time means a part is unreadable: renew at once.
func (b TLSBundle) RenewAt() time.Time {
	at := renewalTime(b.CA.Cert.NotBefore, b.CA.Cert.NotAfter)
	for _, certPEM := range [][]byte{b.Server.CertPEM, b.Client.CertPEM} {
		cert, err := parseCert(certPEM)
		if err != nil {
			return time.Time{}
		}
		at = earliest(at, renewalTime(cert.NotBefore, cert.NotAfter))
	}
	if len(b.PreviousCACertPEM) == 0 {
		return at
	}
	previous, err := parseCert(b.PreviousCACertPEM)
	if err != nil {
		return time.Time{}
	}
	return earliest(at, previous.NotAfter)
}

// Covers says whether the first certificate of certPEM is valid for every host (wildcards in the
// certificate match as TLS clients match them).
func Covers(certPEM []byte, hosts []string) bool {
	cert, err := parseCert(certPEM)
	if err != nil {
		return false
	}
	for _, h := range hosts {
		if cert.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// SignedBy says whether the first certificate of certPEM carries a signature of the first
// certificate of caCertPEM. Validity periods and usages are not checked.
func SignedBy(certPEM, caCertPEM []byte) bool {
	cert, err := parseCert(certPEM)
	if err != nil {
		return false
	}
	ca, err := parseCert(caCertPEM)
	if err != nil {
		return false
	}
	return cert.CheckSignatureFrom(ca) == nil
}

// ensureCA returns the CA to sign with and the previous CA certificate to keep trusting, if any.
func ensureCA(stored StoredTLS, commonName string, now time.Time) (*CA, []byte, error) {
	current, err := usableCA(stored.CACert, stored.CAKey, now)
	if err == nil && !RenewalDue(now, current.Cert.NotBefore, current.Cert.NotAfter) {
		return current, liveCACert(stored.PreviousCACert, now), nil
	}
	next, err := NewCA(commonName, now, CAValidity)
	if err != nil {
		return nil, nil, err
	}
	// The retiring certificate may still vouch for live leaves, even when its key is lost. If it is
	// unreadable, an older previous CA still in its overlap is the best we have.
	previous := liveCACert(stored.CACert, now)
	if previous == nil {
		previous = liveCACert(stored.PreviousCACert, now)
	}
	return next, previous, nil
}

// usableCA loads a CA that can sign today. LoadCA does not check that the key belongs to the
// certificate; a mismatch would sign leaves that verify nowhere, so it is checked here.
func usableCA(certPEM, keyPEM []byte, now time.Time) (*CA, error) {
	ca, err := LoadCA(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	if !ca.Cert.IsCA || !now.Before(ca.Cert.NotAfter) {
		return nil, errors.New("the stored CA certificate is not a CA or has expired")
	}
	pub, ok := ca.Key.Public().(interface{ Equal(x crypto.PublicKey) bool })
	if !ok || !pub.Equal(ca.Cert.PublicKey) {
		return nil, errors.New("the stored CA key does not belong to its certificate")
	}
	// Canonical PEM: CABundlePEM concatenates it, which needs its trailing newline.
	ca.CertPEM = encodeCert(ca.Cert.Raw)
	return ca, nil
}

// liveCACert returns the canonical PEM of the first certificate of certPEM if it is an unexpired CA,
// else nil.
func liveCACert(certPEM []byte, now time.Time) []byte {
	cert, err := parseCert(certPEM)
	if err != nil || !cert.IsCA || !now.Before(cert.NotAfter) {
		return nil
	}
	return encodeCert(cert.Raw)
}

func ensureServer(stored StoredTLS, ca *CA, hosts []string, now time.Time) (*KeyPair, error) {
	cert := usableLeaf(stored.ServerCert, stored.ServerKey, ca, x509.ExtKeyUsageServerAuth, now)
	if cert != nil && slices.Equal(certHosts(cert), hosts) {
		return &KeyPair{CertPEM: stored.ServerCert, KeyPEM: stored.ServerKey, NotAfter: cert.NotAfter}, nil
	}
	dnsNames, ips := splitHosts(hosts)
	kp, err := ca.IssueServer(dnsNames, ips, now, LeafValidity)
	if err != nil {
		return nil, fmt.Errorf("issuing the Replicator server certificate: %w", err)
	}
	return kp, nil
}

func ensureClient(stored StoredTLS, ca *CA, commonName string, now time.Time) (*KeyPair, error) {
	cert := usableLeaf(stored.ClientCert, stored.ClientKey, ca, x509.ExtKeyUsageClientAuth, now)
	if cert != nil && cert.Subject.CommonName == commonName {
		return &KeyPair{CertPEM: stored.ClientCert, KeyPEM: stored.ClientKey, NotAfter: cert.NotAfter}, nil
	}
	kp, err := ca.IssueClient(commonName, now, LeafValidity)
	if err != nil {
		return nil, fmt.Errorf("issuing the Replicator client certificate: %w", err)
	}
	return kp, nil
}

// usableLeaf returns the stored leaf if it can stay: its key matches, it chains to the current CA
// alone for usage at now, and it is not yet due for renewal. Otherwise nil.
func usableLeaf(certPEM, keyPEM []byte, ca *CA, usage x509.ExtKeyUsage, now time.Time) *x509.Certificate {
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil
	}
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	opts := x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}}
	if _, err := cert.Verify(opts); err != nil || RenewalDue(now, cert.NotBefore, cert.NotAfter) {
		return nil
	}
	return cert
}

// normalizeHosts makes a set of hosts comparable: lower case, IPs in canonical form, no blanks or
// duplicates, sorted (so the server certificate's CN, its first name, is stable too).
func normalizeHosts(hosts []string) []string {
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		h = strings.ToLower(strings.TrimSpace(h))
		if ip := net.ParseIP(h); ip != nil {
			h = ip.String()
		}
		if h != "" {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func certHosts(cert *x509.Certificate) []string {
	hosts := slices.Clone(cert.DNSNames)
	for _, ip := range cert.IPAddresses {
		hosts = append(hosts, ip.String())
	}
	return normalizeHosts(hosts)
}

// splitHosts puts IP literals in IP SANs, where TLS clients look for them.
func splitHosts(hosts []string) (dnsNames []string, ips []net.IP) {
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			dnsNames = append(dnsNames, h)
		}
	}
	return dnsNames, ips
}

func parseCert(certPEM []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("not a PEM certificate")
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing a certificate: %w", err)
	}
	return cert, nil
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// stored is what the Secrets hold once this bundle is written.
func (b TLSBundle) stored() StoredTLS {
	return StoredFrom(b.CASecretData(), b.ServerSecretData(), b.ClientSecretData())
}

func (s StoredTLS) equal(o StoredTLS) bool {
	return slices.EqualFunc(s.fields(), o.fields(), bytes.Equal)
}

func (s StoredTLS) fields() [][]byte {
	return [][]byte{s.CACert, s.CAKey, s.PreviousCACert, s.ServerCert, s.ServerKey, s.ClientCert, s.ClientKey}
}
