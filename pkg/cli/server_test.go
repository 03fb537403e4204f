package cli

import (
	"bytes"
	"crypto/tls"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/flotilla-dev/flotilla/pkg/pki"
)

func TestRegisteredClusterTakesOnlyAnHTTPSServer(t *testing.T) {
	own := &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443", CertificateAuthorityData: []byte("ca")}
	for _, tc := range []struct {
		server, want string
		wantErr      bool
	}{
		{server: "", want: "https://127.0.0.1:6443"},
		{server: "https://10.1.2.3:6443", want: "https://10.1.2.3:6443"},
		{server: "https://api.eu.example", want: "https://api.eu.example"},
		{server: "http://10.1.2.3:6443", wantErr: true},
		{server: "10.1.2.3:6443", wantErr: true},
		{server: "https://", wantErr: true},
		{server: "https://%zz", wantErr: true},
	} {
		got, err := registeredCluster(own, tc.server)
		if tc.wantErr {
			if err == nil {
				t.Errorf("%q: accepted as %s", tc.server, got.Server)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.server, err)
			continue
		}
		if got.Server != tc.want || string(got.CertificateAuthorityData) != "ca" {
			t.Errorf("%q: got %s (CA %q), want %s with the context's CA", tc.server, got.Server, got.CertificateAuthorityData, tc.want)
		}
	}
	if own.Server != "https://127.0.0.1:6443" {
		t.Errorf("the context's own entry changed: %s", own.Server)
	}
}

// A --server whose certificate the context's CA does not verify is refused, not registered with a
// warning: the manager verifies with the same CA data.
func TestCheckServerRefusesACertificateTheContextDoesNotTrust(t *testing.T) {
	own := httptest.NewTLSServer(http.NotFoundHandler())
	defer own.Close()
	// Another cluster: its own CA (httptest's default certificate is the same for every server).
	otherCA, err := pki.NewCA("other-ca", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := otherCA.IssueServer(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	other := httptest.NewUnstartedServer(http.NotFoundHandler())
	other.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	other.StartTLS()
	defer other.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: own.Certificate().Raw})
	user := clientcmdapi.NewConfig()
	user.Clusters["c"] = &clientcmdapi.Cluster{Server: own.URL, CertificateAuthorityData: ca}
	user.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	user.Contexts["eu"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	ownClient := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(&corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: "uid-eu"}}).Build()
	var out bytes.Buffer
	err = checkServer(t.Context(), user, "eu", other.URL, ownClient, &out)
	if err == nil || !strings.Contains(err.Error(), "does not present a certificate context eu trusts") {
		t.Fatalf("want a refusal, got %v (output %q)", err, out.String())
	}
}

func TestLoopbackWarning(t *testing.T) {
	for server, warn := range map[string]bool{
		"https://127.0.0.1:6443": true, "https://localhost:6443": true, "https://[::1]:6443": true, "https://127.0.5.1": true,
		"https://10.0.0.5:6443": false, "https://api.eu.example.com": false, "::not a url": false,
	} {
		got := loopbackWarning(server)
		if (got != "") != warn {
			t.Errorf("%s: %q", server, got)
		}
		if warn && !strings.Contains(got, "--server") {
			t.Errorf("%s: the warning does not point to --server: %q", server, got)
		}
	}
}
