package cli

import (
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
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
