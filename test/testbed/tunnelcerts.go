package testbed

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/flotilla-dev/flotilla/pkg/pki"
)

// TunnelCerts are a tunnel endpoint's serving certificate for a bed (the e2e suite's, the bench's):
// Dir holds tls.crt and tls.key (the manager's --tunnel-cert-dir), CAFile the CA agents verify.
type TunnelCerts struct{ Dir, CAFile string }

// WriteTunnelCerts issues, under dir, a day's serving certificate for the endpoint at ip and its CA.
func WriteTunnelCerts(dir string, ip net.IP) (TunnelCerts, error) {
	t := TunnelCerts{Dir: filepath.Join(dir, "tunnel-certs"), CAFile: filepath.Join(dir, "tunnel-ca.crt")}
	now := time.Now()
	ca, err := pki.NewCA("flotilla-testbed-tunnel", now, 24*time.Hour)
	if err != nil {
		return t, err
	}
	kp, err := ca.IssueServer(nil, []net.IP{ip}, now, 24*time.Hour)
	if err != nil {
		return t, err
	}
	if err := os.MkdirAll(t.Dir, 0o700); err != nil {
		return t, err
	}
	for path, raw := range map[string][]byte{filepath.Join(t.Dir, "tls.crt"): kp.CertPEM, filepath.Join(t.Dir, "tls.key"): kp.KeyPEM, t.CAFile: ca.CertPEM} {
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			return t, fmt.Errorf("writing the tunnel's certificates: %w", err)
		}
	}
	return t, nil
}
