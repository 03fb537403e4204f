package webhook

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/pkg/pki"
)

// Only the API server is served: a caller needs a certificate of the cluster's client CA and the
// name the API server's admission configuration gives it.
func TestFromAPIServerServesOnlyTheAPIServer(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("cluster-client-ca", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("another-ca", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	serving, err := ca.IssueServer(nil, []net.IP{net.ParseIP("127.0.0.1")}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	servingPair, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(FromAPIServer([]string{"kube-apiserver-webhooks"}, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	})))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{servingPair}, MinVersion: tls.VersionTLS12}
	VerifyClients(func() *x509.CertPool { return pool })(srv.TLS)
	srv.StartTLS()
	defer srv.Close()

	call := func(signer *pki.CA, name string) (int, error) {
		t.Helper()
		cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		if signer != nil {
			kp, err := signer.IssueClient(name, now, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			pair, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 5 * time.Second}
		resp, err := c.Post(srv.URL+Path, "application/json", nil)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	for _, tc := range []struct {
		name   string
		signer *pki.CA
		cn     string
		want   int
	}{
		{"no certificate", nil, "", http.StatusUnauthorized},
		{"a user of the cluster", ca, "alice", http.StatusForbidden},
		{"the API server", ca, "kube-apiserver-webhooks", http.StatusOK},
	} {
		if got, err := call(tc.signer, tc.cn); err != nil || got != tc.want {
			t.Errorf("%s: %d (%v), want %d", tc.name, got, err, tc.want)
		}
	}
	// Not sent (the server names the CAs it accepts), or refused in the handshake: never served.
	if got, err := call(other, "kube-apiserver-webhooks"); err == nil && got != http.StatusUnauthorized {
		t.Errorf("a certificate of another CA: %d, want 401 or the handshake refused", got)
	}
}
