package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestAddRefusesExecCredentialsPointingToJoin(t *testing.T) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["gke"] = &clientcmdapi.Cluster{Server: "https://203.0.113.1"}
	cfg.AuthInfos["gke"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "gke-gcloud-auth-plugin", APIVersion: "client.authentication.k8s.io/v1"}}
	cfg.Contexts["gke_p_z_n"] = &clientcmdapi.Context{Cluster: "gke", AuthInfo: "gke"}
	cfg.CurrentContext = "gke_p_z_n"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "--kubeconfig", path, "cluster", "add", "--secondary-context", "gke_p_z_n")
	if err == nil || !strings.Contains(err.Error(), "flotillactl cluster join") {
		t.Fatalf("err = %v, out %q; want a pointer to join", err, out)
	}
	if _, err := run(t, "--kubeconfig", path, "cluster", "add", "--secondary-context", "missing"); err == nil || !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf("unknown context: err = %v", err)
	}
	if _, err := run(t, "--kubeconfig", path, "cluster", "add", "--secondary-context", "gke_p_z_n", "--name", "Bad_Name"); err == nil || !strings.Contains(err.Error(), "DNS-1123") {
		t.Errorf("bad --name: err = %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

func TestPutAndRemoveContextKeepEntriesDistinct(t *testing.T) {
	reg := clientcmdapi.NewConfig()
	// Two kubeadm clusters whose kubeconfigs both say cluster "kubernetes", user "kubernetes-admin".
	putContext(reg, "one", &clientcmdapi.Cluster{Server: "https://one"}, "kubernetes", &clientcmdapi.AuthInfo{Token: "a"}, "kubernetes-admin")
	putContext(reg, "two", &clientcmdapi.Cluster{Server: "https://two"}, "kubernetes", &clientcmdapi.AuthInfo{Token: "b"}, "kubernetes-admin")
	if reg.Contexts["one"].Cluster == reg.Contexts["two"].Cluster || reg.Contexts["one"].AuthInfo == reg.Contexts["two"].AuthInfo {
		t.Fatalf("entries shared: %+v %+v", reg.Contexts["one"], reg.Contexts["two"])
	}
	if reg.Clusters[reg.Contexts["two"].Cluster].Server != "https://two" || reg.AuthInfos[reg.Contexts["one"].AuthInfo].Token != "a" {
		t.Fatal("an entry was overwritten")
	}
	if !removeContext(reg, "one") || len(reg.Clusters) != 1 || len(reg.AuthInfos) != 1 {
		t.Fatalf("after removal: %d clusters, %d users", len(reg.Clusters), len(reg.AuthInfos))
	}
	if removeContext(reg, "one") {
		t.Error("removing twice succeeded")
	}
	primary := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(&flotillav1.ClusterDetector{
		ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: "two"},
		Status:     flotillav1.ClusterDetectorStatus{ClusterID: "uid-two"}}).Build()
	if err := refuseDuplicate(t.Context(), primary, reg, "two", "https://elsewhere", "uid-other"); err == nil {
		t.Error("a second cluster under a taken name must be refused")
	}
	if err := refuseDuplicate(t.Context(), primary, reg, "two", "https://two", "uid-other"); err != nil {
		t.Errorf("re-registering the same cluster: %v", err)
	}
	// The same cluster (the manager recorded its kube-system UID) reached at another address: a move.
	if err := refuseDuplicate(t.Context(), primary, reg, "two", "https://10.0.0.2:6443", "uid-two"); err != nil {
		t.Errorf("moving a cluster to another address: %v", err)
	}
}

func TestFindContextByContextOrClusterName(t *testing.T) {
	reg := clientcmdapi.NewConfig()
	reg.Contexts["gke_p_z_n"] = &clientcmdapi.Context{}
	reg.Contexts["eu"] = &clientcmdapi.Context{}
	if c, n, err := findContext(reg, "eu"); err != nil || c != "eu" || n != "eu" {
		t.Errorf("eu: %s %s %v", c, n, err)
	}
	name := nameOf(t, "gke_p_z_n")
	if c, _, err := findContext(reg, name); err != nil || c != "gke_p_z_n" {
		t.Errorf("%s: %s %v", name, c, err)
	}
	if _, _, err := findContext(reg, "nope"); err == nil {
		t.Error("unknown name found")
	}
}

func nameOf(t *testing.T, context string) string {
	t.Helper()
	n, err := nameFor(context, "")
	if err != nil {
		t.Fatal(err)
	}
	return n
}
