package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestJoinTakesANamespaceAllowList(t *testing.T) {
	out, err := run(t, "cluster", "join", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--namespaces", "team-*", "Without --namespaces every name is allowed"} {
		if !strings.Contains(out, want) {
			t.Errorf("cluster join --help does not say %q:\n%s", want, out)
		}
	}
	// A list the fence could never honour is refused before anything is reached.
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["eu"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.AuthInfos["eu"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["eu"] = &clientcmdapi.Context{Cluster: "eu", AuthInfo: "eu"}
	cfg.CurrentContext = "eu"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	_, err = run(t, "--kubeconfig", path, "cluster", "join", "--secondary-context", "eu", "--namespaces", "web,kube-*")
	if err == nil || !strings.Contains(err.Error(), "--namespaces") || !strings.Contains(err.Error(), `"kube-*"`) {
		t.Errorf("err = %v; want --namespaces refused, naming kube-*", err)
	}
}

func TestJoinPullChecksItsFlagsFirst(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, []byte("no certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		says []string
	}{
		{[]string{"--pull"}, []string{"--pull needs --tunnel-address HOST:PORT", "--pull needs --tunnel-ca-file"}},
		{[]string{"--pull", "--tunnel-address", "primary.example.com", "--tunnel-ca-file", ca, "--agent-token-duration", "1m"},
			[]string{`not "primary.example.com"`, "holds no PEM certificate", "--agent-token-duration 1m0s: at least 10m"}},
		{[]string{"--tunnel-address", "primary.example.com:8444"}, []string{"go with --pull"}},
	} {
		_, err := run(t, append([]string{"--kubeconfig", filepath.Join(t.TempDir(), "none"), "cluster", "join", "--secondary-context", "eu"}, tc.args...)...)
		for _, want := range tc.says {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("join %v = %v; want it to say %q", tc.args, err, want)
			}
		}
	}
}
