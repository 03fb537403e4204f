package clusters

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestValidateContext(t *testing.T) {
	const secret = "s3cr3t-value"
	accepted := func() *clientcmdapi.Config {
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://eu.example:6443", CertificateAuthorityData: []byte("ca"), TLSServerName: "eu"}
		cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: secret}
		cfg.Contexts["eu"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u", Namespace: "default"}
		return cfg
	}
	tests := []struct {
		name        string
		cluster     func(*clientcmdapi.Cluster)
		user        func(*clientcmdapi.AuthInfo)
		context     func(*clientcmdapi.Context)
		wantRefused []string // nil: accepted
		wantMissing []string
	}{
		{name: "token, CA data and TLS server name"},
		{name: "client certificate and key data", user: func(u *clientcmdapi.AuthInfo) {
			u.Token, u.ClientCertificateData, u.ClientKeyData = "", []byte(secret), []byte(secret)
		}},
		{name: "no credentials at all", user: func(u *clientcmdapi.AuthInfo) { u.Token = "" }},
		{name: "the origin the loader records is no field", cluster: func(c *clientcmdapi.Cluster) { c.LocationOfOrigin = "/home/x/.kube/config" },
			user: func(u *clientcmdapi.AuthInfo) { u.LocationOfOrigin = "/home/x/.kube/config" }},
		{name: "empty extension maps", cluster: func(c *clientcmdapi.Cluster) { c.Extensions = map[string]runtime.Object{} },
			user: func(u *clientcmdapi.AuthInfo) { u.Extensions = map[string]runtime.Object{} }},

		{name: "exec", user: func(u *clientcmdapi.AuthInfo) { u.Exec = &clientcmdapi.ExecConfig{Command: secret} }, wantRefused: []string{"user.exec"}},
		{name: "auth-provider", user: func(u *clientcmdapi.AuthInfo) { u.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"} },
			wantRefused: []string{"user.auth-provider"}},
		{name: "tokenFile", user: func(u *clientcmdapi.AuthInfo) { u.TokenFile = "/var/run/secrets/" + secret }, wantRefused: []string{"user.tokenFile"}},
		{name: "client-certificate file", user: func(u *clientcmdapi.AuthInfo) { u.ClientCertificate = "/" + secret },
			wantRefused: []string{"user.client-certificate"}},
		{name: "client-key file", user: func(u *clientcmdapi.AuthInfo) { u.ClientKey = "/" + secret }, wantRefused: []string{"user.client-key"}},
		{name: "certificate-authority file", cluster: func(c *clientcmdapi.Cluster) { c.CertificateAuthority = "/" + secret },
			wantRefused: []string{"cluster.certificate-authority"}},
		{name: "as", user: func(u *clientcmdapi.AuthInfo) { u.Impersonate = "system:admin" }, wantRefused: []string{"user.as"}},
		{name: "as-uid", user: func(u *clientcmdapi.AuthInfo) { u.ImpersonateUID = "1" }, wantRefused: []string{"user.as-uid"}},
		{name: "as-groups", user: func(u *clientcmdapi.AuthInfo) { u.ImpersonateGroups = []string{"system:masters"} },
			wantRefused: []string{"user.as-groups"}},
		{name: "as-user-extra", user: func(u *clientcmdapi.AuthInfo) { u.ImpersonateUserExtra = map[string][]string{"k": {"v"}} },
			wantRefused: []string{"user.as-user-extra"}},
		{name: "proxy-url", cluster: func(c *clientcmdapi.Cluster) { c.ProxyURL = "http://" + secret }, wantRefused: []string{"cluster.proxy-url"}},
		{name: "username", user: func(u *clientcmdapi.AuthInfo) { u.Username = secret }, wantRefused: []string{"user.username"}},
		{name: "password", user: func(u *clientcmdapi.AuthInfo) { u.Password = secret }, wantRefused: []string{"user.password"}},
		{name: "insecure-skip-tls-verify", cluster: func(c *clientcmdapi.Cluster) { c.InsecureSkipTLSVerify = true },
			wantRefused: []string{"cluster.insecure-skip-tls-verify"}},
		{name: "disable-compression", cluster: func(c *clientcmdapi.Cluster) { c.DisableCompression = true },
			wantRefused: []string{"cluster.disable-compression"}},
		{name: "cluster extensions", cluster: func(c *clientcmdapi.Cluster) { c.Extensions = map[string]runtime.Object{"x": nil} },
			wantRefused: []string{"cluster.extensions"}},
		{name: "user extensions", user: func(u *clientcmdapi.AuthInfo) { u.Extensions = map[string]runtime.Object{"x": nil} },
			wantRefused: []string{"user.extensions"}},
		{name: "several, all named in order", user: func(u *clientcmdapi.AuthInfo) {
			u.Exec, u.TokenFile = &clientcmdapi.ExecConfig{Command: "x"}, "/f"
		}, cluster: func(c *clientcmdapi.Cluster) { c.ProxyURL = "http://p" },
			wantRefused: []string{"cluster.proxy-url", "user.tokenFile", "user.exec"}},
		{name: "missing cluster entry", context: func(k *clientcmdapi.Context) { k.Cluster = "gone" }, wantMissing: []string{"cluster"}},
		{name: "missing user entry", context: func(k *clientcmdapi.Context) { k.AuthInfo = "gone" }, wantMissing: []string{"user"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := accepted()
			if tc.cluster != nil {
				tc.cluster(cfg.Clusters["c"])
			}
			if tc.user != nil {
				tc.user(cfg.AuthInfos["u"])
			}
			if tc.context != nil {
				tc.context(cfg.Contexts["eu"])
			}
			err := ValidateContext(cfg, "eu")
			if tc.wantRefused == nil && tc.wantMissing == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var invalid *InvalidContextError
			if !errors.As(err, &invalid) {
				t.Fatalf("err = %v, want an InvalidContextError", err)
			}
			if strings.Join(invalid.Refused, ",") != strings.Join(tc.wantRefused, ",") ||
				strings.Join(invalid.Missing, ",") != strings.Join(tc.wantMissing, ",") {
				t.Errorf("refused %v missing %v, want %v %v", invalid.Refused, invalid.Missing, tc.wantRefused, tc.wantMissing)
			}
			msg := err.Error()
			if strings.Contains(msg, secret) {
				t.Errorf("the message shows a value: %q", msg)
			}
			for _, f := range tc.wantRefused {
				if !strings.Contains(msg, f[strings.Index(f, ".")+1:]) {
					t.Errorf("the message does not name %s: %q", f, msg)
				}
			}
		})
	}
	if err := ValidateContext(accepted(), "nope"); err == nil {
		t.Error("an unknown context was accepted")
	}
}
