package webhook

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"slices"
)

// VerifyClients makes a webhook server's TLS ask each caller for a client certificate and verify
// it against the cluster's client CA (pool: the current one, reloaded as it rotates). A caller
// without one still connects (the readiness check does): FromAPIServer refuses its requests.
func VerifyClients(pool func() *x509.CertPool) func(*tls.Config) {
	return func(base *tls.Config) {
		base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			// The server's own config, certificate watcher included, for this connection.
			c := base.Clone()
			c.GetConfigForClient = nil
			c.ClientCAs, c.ClientAuth = pool(), tls.VerifyClientCertIfGiven
			return c, nil
		}
	}
}

// FromAPIServer serves only callers whose client certificate the cluster's client CA signed and
// whose common name is one of names: the API server, as its admission configuration presents
// itself (the client CA signs every user certificate of the cluster, so the CA alone is not
// enough). Anyone else gets 401 (no verified certificate) or 403, and costs nothing more.
func FromAPIServer(names []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
			http.Error(w, "the admission webhook serves only the API server: no client certificate of the cluster's client CA", http.StatusUnauthorized)
			return
		}
		if cn := r.TLS.VerifiedChains[0][0].Subject.CommonName; !slices.Contains(names, cn) {
			http.Error(w, "the admission webhook serves only the API server: client "+cn+" is not one of --webhook-client-names", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
