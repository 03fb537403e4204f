package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

var e2eScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(flotillav1.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(mcsv1beta1.Install(s))
	return s
}()

// clientOf is a controller-runtime client of a bed cluster, as its admin.
func clientOf(c *testbed.Cluster) client.Client {
	cl, err := client.New(c.RESTConfig, client.Options{Scheme: e2eScheme})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// flotillactl runs the CLI against the bed's kubeconfig, the primary as primary context.
func flotillactl(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	full := append([]string{"--kubeconfig", bed.KubeconfigPath, "--context", testbed.PrimaryName}, args...)
	cmd := exec.CommandContext(ctx, cliBin, full...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// joinBothSecondaries (re-)joins both secondaries (other suites may have removed one; join is
// idempotent) and waits until they are Running with Ready virtual nodes.
func joinBothSecondaries(ctx SpecContext) {
	for _, c := range bed.Secondaries {
		joinSecondary(ctx, c)
	}
	Eventually(func(g Gomega) {
		for _, c := range bed.Secondaries {
			expectRunningAndReady(g, ctx, c.Name)
			expectPlaceableIn(g, ctx, c.Name)
		}
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
}

// joinSecondary joins one secondary with join's further flags. Retried: right after the suite
// changed how the manager runs, a join can meet the primary mid-change; the last error is reported.
func joinSecondary(ctx SpecContext, c *testbed.Cluster, flags ...string) {
	Eventually(func() error {
		out, err := flotillactl(ctx, append([]string{"cluster", "join", "--secondary-context", c.Name, "--token-duration", "10m"}, flags...)...)
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
}

// probeNamespace is where expectPlaceableIn asks the webhook, by dry run, where it would place a pod.
const probeNamespace = "e2e-placement-probe"

// expectPlaceableIn asserts that the webhook itself would place an elected pod in the cluster now.
// A virtual node Ready in the API server is not enough: the webhook decides from the manager's
// registry and caches, which see a cluster that has just joined a moment later (a CI run once
// created a Deployment in that moment and all its replicas went to the other secondary). A dry-run
// create runs the webhook and stores nothing.
func expectPlaceableIn(g Gomega, ctx SpecContext, cluster string) {
	ensureProbeNamespace(g, ctx)
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe-" + cluster, Annotations: map[string]string{
			flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: cluster}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "registry.k8s.io/pause:3.10"}}},
	}
	placed, err := bed.Primary.Clientset.CoreV1().Pods(probeNamespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(placed.Spec.NodeName).To(Equal(flotillav1.VirtualNodeName(cluster)),
		"the webhook would not place a pod in %s yet: %s", cluster, placed.Annotations[flotillav1.AnnotationNoClusterFits])
}

// ensureProbeNamespace makes the namespace where expectPlaceableIn asks the webhook.
func ensureProbeNamespace(g Gomega, ctx SpecContext) {
	_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: probeNamespace, Labels: map[string]string{flotillav1.LabelEnabled: "true"}}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	// Not left to the controller-manager: without it, the primary's ServiceAccount admission
	// refuses the probe.
	_, err = bed.Primary.Clientset.CoreV1().ServiceAccounts(probeNamespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
}

// prepareNamespace makes a namespace Flotilla may write to exist in a secondary with its default
// ServiceAccount. Specs about something else use it: right after the bed restarted or froze a
// cluster, its controller-manager has been seen to take minutes to create a new namespace's
// default ServiceAccount (delegates rightly wait for it; the transient-error spec covers that).
func prepareNamespace(ctx SpecContext, c *testbed.Cluster, name string) {
	_, err := c.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{flotillav1.LabelManagedBy: primaryID(ctx), flotillav1.LabelPrimary: primaryID(ctx)}}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	_, err = c.Clientset.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
}

// editRegistration rewrites the registration Secret's raw kubeconfig.
// The manager renews the joined tokens in the same Secret (every ~12 s here): a conflict is tried
// again on the Secret as it now is.
func editRegistration(ctx context.Context, edit func(raw []byte) []byte) {
	cl := clientOf(bed.Primary)
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var secret corev1.Secret
		if err := cl.Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: flotillav1.KubeconfigSecretName}, &secret); err != nil {
			return err
		}
		secret.Data[flotillav1.KubeconfigSecretKey] = edit(secret.Data[flotillav1.KubeconfigSecretKey])
		return cl.Update(ctx, &secret)
	})).To(Succeed())
}

// editRegistrationConfig edits the registration kubeconfig as a structure.
func editRegistrationConfig(ctx context.Context, edit func(cfg *clientcmdapi.Config)) {
	editRegistration(ctx, func(raw []byte) []byte {
		cfg, err := clientcmd.Load(raw)
		Expect(err).NotTo(HaveOccurred())
		edit(cfg)
		out, err := clientcmd.Write(*cfg)
		Expect(err).NotTo(HaveOccurred())
		return out
	})
}

// registeredServer is the API server URL the registration kubeconfig holds for a cluster.
func registeredServer(ctx context.Context, name string) string {
	var secret corev1.Secret
	Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: flotillav1.KubeconfigSecretName}, &secret)).To(Succeed())
	cfg, err := clientcmd.Load(secret.Data[flotillav1.KubeconfigSecretKey])
	Expect(err).NotTo(HaveOccurred())
	kctx := cfg.Contexts[name]
	Expect(kctx).NotTo(BeNil(), "context %s in the registration", name)
	return cfg.Clusters[kctx.Cluster].Server
}

// serverAtHostIP is a bed cluster's API server URL at the host's address (the real node's IP)
// instead of 127.0.0.1 (kwokctl's serving certificate holds every host address): what a manager in
// a pod reaches.
func serverAtHostIP(c *testbed.Cluster) string {
	u, err := url.Parse(c.RESTConfig.Host)
	Expect(err).NotTo(HaveOccurred())
	ip, err := testbed.HostIP()
	Expect(err).NotTo(HaveOccurred())
	u.Host = net.JoinHostPort(ip.String(), u.Port())
	return u.String()
}

// detector reads a ClusterDetector.
func detector(ctx context.Context, name string) (*flotillav1.ClusterDetector, error) {
	var cd flotillav1.ClusterDetector
	err := clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: name}, &cd)
	return &cd, err
}

// nodeReady returns the status of a node's Ready condition ("" when the node is missing).
func nodeReady(ctx context.Context, name string) (corev1.ConditionStatus, error) {
	n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status, nil
		}
	}
	return "", nil
}

// helm runs the test bed's helm against one of its clusters.
func helm(ctx context.Context, c *testbed.Cluster, args ...string) (string, error) {
	tools, err := testbed.ToolsDir("")
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	full := append([]string{"--kubeconfig", c.KubeconfigPath, "--kube-context", c.Name}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(tools, "helm"), full...)
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(workDir, "helm", "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(workDir, "helm", "config"), "HELM_DATA_HOME="+filepath.Join(workDir, "helm", "data"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// serviceAccountKubeconfig writes a kubeconfig that reaches c as a ServiceAccount, with a token
// from the TokenRequest API: the manager runs with the chart's identity, so the tests prove its RBAC.
func serviceAccountKubeconfig(ctx context.Context, c *testbed.Cluster, namespace, name, path string) error {
	seconds := int64(24 * 3600)
	tr, err := c.Clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("minting a token for %s/%s: %w", namespace, name, err)
	}
	admin, err := clientcmd.LoadFromFile(c.KubeconfigPath)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[c.Name] = admin.Clusters[c.Name]
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: name}
	cfg.CurrentContext = c.Name
	return clientcmd.WriteToFile(*cfg, path)
}

// stopForSpec stops a cluster of the bed for a spec and returns what starts it again; if the spec
// ends first, its cleanup starts it.
func stopForSpec(ctx SpecContext, c *testbed.Cluster) (startAgain func(SpecContext)) {
	Expect(bed.StopCluster(ctx, c)).To(Succeed())
	stopped := true
	DeferCleanup(func(ctx SpecContext) {
		if stopped {
			Expect(bed.StartCluster(ctx, c)).To(Succeed())
		}
	})
	return func(ctx SpecContext) {
		Expect(bed.StartCluster(ctx, c)).To(Succeed())
		stopped = false
	}
}
