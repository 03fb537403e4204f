package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// registrationSecret is the registration Secret holding cfg.
func registrationSecret(t *testing.T, cfg *clientcmdapi.Config) *corev1.Secret {
	t.Helper()
	raw, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: flotillav1.KubeconfigSecretName},
		Data: map[string][]byte{flotillav1.KubeconfigSecretKey: raw}}
}

// execRegistration is a registration whose context "eu" runs a command on whoever builds a client
// from it: the command leaves the file marker.
func execRegistration(t *testing.T, marker string) *clientcmdapi.Config {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["eu"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.AuthInfos["eu"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1", Command: "/bin/sh", Args: []string{"-c", "touch " + marker + "; exit 1"},
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
	cfg.Contexts["eu"] = &clientcmdapi.Context{Cluster: "eu", AuthInfo: "eu"}
	return cfg
}

// `cluster remove` deletes the FlotillaPrimary with the registered credentials: a registered exec
// plugin must not run on the operator's machine for that.
func TestRemoveNeverRunsARegisteredExecPlugin(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	primary := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(registrationSecret(t, execRegistration(t, marker))).Build()
	var out bytes.Buffer
	err := deleteOwner(t.Context(), primary, "primary-id", "eu", "eu", false, &out)
	if _, statErr := os.Stat(marker); statErr == nil {
		t.Fatal("the registered exec plugin ran on the machine running cluster remove")
	}
	if err != nil {
		t.Fatalf("remove stops at a refused context (it must still let the operator remove it): %v", err)
	}
	if !strings.Contains(out.String(), "exec") || !strings.Contains(out.String(), "refused") {
		t.Errorf("output does not say the context is refused and why:\n%s", out.String())
	}
}

// `cluster list` shows a refused context as such, naming the refused field, even before (or
// without) a manager that reports it in the ClusterDetector.
func TestListShowsARefusedContext(t *testing.T) {
	cfg := execRegistration(t, filepath.Join(t.TempDir(), "ran"))
	cfg.Clusters["good"] = &clientcmdapi.Cluster{Server: "https://good:6443"}
	cfg.AuthInfos["good"] = &clientcmdapi.AuthInfo{Token: "good-token-value"}
	cfg.Contexts["good"] = &clientcmdapi.Context{Cluster: "good", AuthInfo: "good"}
	primary := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(registrationSecret(t, cfg)).Build()
	var out bytes.Buffer
	if err := listClusters(t.Context(), primary, &out, ""); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	var eu, good string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "eu "):
			eu = l
		case strings.HasPrefix(l, "good "):
			good = l
		}
	}
	if !strings.Contains(eu, "InvalidContext") || strings.Contains(good, "InvalidContext") {
		t.Errorf("rows: eu %q, good %q; want eu InvalidContext only:\n%s", eu, good, out.String())
	}
	if !strings.Contains(out.String(), "user.exec") || strings.Contains(out.String(), "good-token-value") || strings.Contains(out.String(), "/bin/sh") {
		t.Errorf("the output must name the refused field and no value:\n%s", out.String())
	}
}

// doctor reports a cluster the manager refuses to use, with the reason the ClusterDetector gives.
func TestDoctorReportsARefusedRegistration(t *testing.T) {
	objs := append(primaryObjects(), &flotillav1.ClusterDetector{
		ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: "eu"},
		Status: flotillav1.ClusterDetectorStatus{ClusterStatus: flotillav1.ClusterUnknown, Reason: flotillav1.ReasonInvalidContext,
			Message: `context "eu" is refused: user entry "eu" has exec`}})
	c := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(objs...).Build()
	out, _ := doctorWith(t, c)
	if !strings.Contains(out, "ERROR cluster eu is not used: InvalidContext: context \"eu\" is refused: user entry \"eu\" has exec") {
		t.Errorf("doctor does not report the refused context:\n%s", out)
	}
}

// doctor reports a secondary that answers with another identity than the one pinned for it.
func TestDoctorReportsAChangedIdentity(t *testing.T) {
	objs := append(primaryObjects(), &flotillav1.ClusterDetector{
		ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: "a"},
		Status: flotillav1.ClusterDetectorStatus{ClusterStatus: flotillav1.ClusterUnknown, Reason: flotillav1.ReasonIdentityChanged,
			ClusterID: "first-uid", Message: "Cluster a answered with kube-system UID rebuilt-uid, not first-uid"}})
	c := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(objs...).Build()
	out, _ := doctorWith(t, c)
	if !strings.Contains(out, "ERROR cluster a is not used: IdentityChanged: Cluster a answered with kube-system UID rebuilt-uid") {
		t.Errorf("doctor does not report the changed identity:\n%s", out)
	}
}
