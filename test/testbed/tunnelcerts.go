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
	ca, err := writeServingCert(t.Dir, "flotilla-testbed-tunnel", ip)
	if err != nil {
		return t, fmt.Errorf("writing the tunnel's certificates: %w", err)
	}
	if err := os.WriteFile(t.CAFile, ca, 0o600); err != nil {
		return t, fmt.Errorf("writing the tunnel's CA: %w", err)
	}
	return t, nil
}

// writeServingCert issues, in dir, a day's serving certificate (tls.crt, tls.key) for ip from a
// new CA named cn, and returns the CA's certificate.
func writeServingCert(dir, cn string, ip net.IP) ([]byte, error) {
	now := time.Now()
	ca, err := pki.NewCA(cn, now, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	kp, err := ca.IssueServer(nil, []net.IP{ip}, now, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for path, raw := range map[string][]byte{filepath.Join(dir, "tls.crt"): kp.CertPEM, filepath.Join(dir, "tls.key"): kp.KeyPEM} {
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return ca.CertPEM, nil
}
