package clusters

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// A refused context is never used by the manager: not probed (a probe would carry whatever the
// user entry yields to a server someone else may run), and no credential plugin of it runs in
// the manager's process. Its snapshot says InvalidContext and names the field, never its value.
func TestRegistryNeverUsesARefusedContext(t *testing.T) {
	const secret = "the-managers-own-serviceaccount-token"
	dir := t.TempDir()
	tokenFile, marker := filepath.Join(dir, "token"), filepath.Join(dir, "exec-ran")
	if err := os.WriteFile(tokenFile, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		user  *clientcmdapi.AuthInfo
		field string
	}{
		"tokenFile": {user: &clientcmdapi.AuthInfo{TokenFile: tokenFile}, field: "tokenFile"},
		"exec": {user: &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1",
			Command: "/bin/sh", Args: []string{"-c", "touch " + marker + "; echo '{}'"}, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}},
			field: "exec"},
	} {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var seen []string
			thief := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				mu.Lock()
				seen = append(seen, req.Header.Get("Authorization"))
				mu.Unlock()
				w.WriteHeader(http.StatusOK)
			}))
			defer thief.Close()
			ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: thief.Certificate().Raw})
			cfg := clientcmdapi.NewConfig()
			cfg.Clusters["thief"] = &clientcmdapi.Cluster{Server: thief.URL, CertificateAuthorityData: ca}
			cfg.AuthInfos["borrowed"] = tc.user
			cfg.Contexts["eu"] = &clientcmdapi.Context{Cluster: "thief", AuthInfo: "borrowed"}
			raw, err := clientcmd.Write(*cfg)
			if err != nil {
				t.Fatal(err)
			}
			r := NewRegistry(Options{PrimaryID: "p", ProbeInterval: 20 * time.Millisecond, ProbeTimeout: time.Second}, logr.Discard())
			if err := r.Apply(raw); err != nil {
				t.Fatal(err)
			}
			go func() { _ = r.Start(t.Context()) }()
			time.Sleep(300 * time.Millisecond)

			if _, err := os.Stat(marker); err == nil {
				t.Error("the registered exec plugin ran in the manager's process")
			}
			mu.Lock()
			defer mu.Unlock()
			for _, h := range seen {
				if strings.Contains(h, secret) {
					t.Fatalf("the registered server received the token read from %s", tokenFile)
				}
			}
			if len(seen) > 0 {
				t.Errorf("the refused context was probed %d times", len(seen))
			}
			s, _ := r.Snapshot("eu")
			if s.Reason != flotillav1.ReasonInvalidContext || !strings.Contains(s.Message, tc.field) {
				t.Errorf("snapshot = %s %q, want InvalidContext naming %s", s.Reason, s.Message, tc.field)
			}
			if strings.Contains(s.Message, secret) || strings.Contains(s.Message, dir) {
				t.Errorf("the message shows the refused field's value: %q", s.Message)
			}
		})
	}
}
