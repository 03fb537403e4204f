package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// What the groups on real nodes share: the application image's containers and pods, the image
// on every real node, the flat network's set-up, namespaces enabled for a group and deleted
// everywhere after it, the manager restarted with flags of a group's own.

// appContainer is a container of the bed's application image: its HTTP server (with a
// readiness probe) when command is nil, else the command.
func appContainer(name string, command []string) corev1.Container {
	c := corev1.Container{Name: name, Image: testbed.TestAppImage, ImagePullPolicy: corev1.PullNever, Command: command,
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		}}
	if command == nil {
		c.Ports = []corev1.ContainerPort{{ContainerPort: 8080}}
		c.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}}}
	}
	return c
}

// onRealNode is a pod spec of one container that runs only on a real node: the delegate gets the
// node selector and toleration, so a secondary's real node is where it lands.
func onRealNode(c corev1.Container) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{c},
		NodeSelector: map[string]string{testbed.RealNodeKey: "true"},
		Tolerations:  []corev1.Toleration{{Key: testbed.RealNodeKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}
}

// runInSecondary runs a script in a pod of the application image on a secondary's real node and
// returns its output once it has completed.
func runInSecondary(g Gomega, ctx SpecContext, c *testbed.Cluster, name, script string) string {
	return runInCluster(g, ctx, c, "real-delegates", name, script)
}

// runInCluster runs a script in a pod of the application image on a cluster's real node, in a
// namespace, and returns its output once it has completed.
func runInCluster(g Gomega, ctx SpecContext, c *testbed.Cluster, namespace, name, script string) string {
	spec := onRealNode(appContainer("client", []string{"sh", "-c", script}))
	spec.RestartPolicy = corev1.RestartPolicyNever
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	pods := c.Clientset.CoreV1().Pods(namespace)
	_, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			break
		}
		g.Expect(time.Now().Before(deadline)).To(BeTrue(), "client pod %s in %s not done in 30 s: %s", name, c.Name, p.Status.Phase)
		time.Sleep(500 * time.Millisecond)
	}
	raw, err := pods.GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	return string(raw)
}

// flatRealNodes prepares a group on real nodes and the flat pod network (skipped, saying why,
// where the bed has neither): both secondaries joined, the application image on every real node,
// the namespace enabled. The suite's manager already runs with --pod-network=flat on such a bed.
func flatRealNodes(ctx SpecContext, ns string) {
	if bed.RealNode == nil {
		Skip(fmt.Sprintf("the primary has no real node: %v", realNodeErr))
	}
	requireSecondaryRealNodes()
	if secondaryPodNetwork != testbed.PodNetworkFlat {
		Skip(fmt.Sprintf("the bed's pod network is %s (FLOTILLA_E2E_SECONDARY_POD_NETWORK)", secondaryPodNetwork))
	}
	joinBothSecondaries(ctx)
	importAppImage(ctx, true)
	enabledNamespace(ctx, ns)
}

// deleteNamespaceEverywhere deletes a namespace of the primary and waits until it is gone there
// and in every secondary (Flotilla removes the ones it made): real containers take their grace
// period to stop, and the next specs count the writes in the secondaries.
func deleteNamespaceEverywhere(ctx SpecContext, ns string) {
	_ = bed.Primary.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	Eventually(func(g Gomega) {
		for _, c := range bed.Clusters() {
			_, err := c.Clientset.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "namespace %s still in %s: %v", ns, c.Name, err)
		}
	}).WithContext(ctx).WithTimeout(150 * time.Second).WithPolling(time.Second).Should(Succeed())
}

// appImage is the bed's application image tarball, built once per suite, and the real nodes it
// was imported into: a node keeps its images for the whole run (no spec removes one), so each
// node imports it once, whichever group asks first.
var appImage struct {
	once     sync.Once
	tar      string
	err      error
	imported map[string]bool
}

// markAppImageImported records, in a parallel process other than the first, that the first
// imported the application image into every real node before the specs began (the suite's set-up).
func markAppImageImported() {
	appImage.once.Do(func() {
		appImage.imported = map[string]bool{}
		if secondaryRealNodesErr != nil {
			return
		}
		if bed.RealNode != nil {
			appImage.imported[bed.RealNode.Name] = true
		}
		for _, c := range bed.Secondaries {
			appImage.imported[c.RealNode.Name] = true
		}
	})
}

// importAppImage imports the application image into every secondary's real node, and the
// primary's too when asked.
func importAppImage(ctx SpecContext, primaryToo bool) {
	appImage.once.Do(func() {
		appImage.tar, appImage.err = testbed.BuildTestAppImage(ctx, filepath.Join(workDir, "images"))
		appImage.imported = map[string]bool{}
	})
	Expect(appImage.err).NotTo(HaveOccurred())
	importInto := func(name string, node interface {
		ImportImage(context.Context, string) error
	}) {
		if appImage.imported[name] {
			return
		}
		Expect(node.ImportImage(ctx, appImage.tar)).To(Succeed())
		appImage.imported[name] = true
	}
	if primaryToo {
		importInto(bed.RealNode.Name, bed.RealNode)
	}
	for _, c := range bed.Secondaries {
		importInto(c.RealNode.Name, c.RealNode)
	}
}

// restartManager stops the suite's manager and starts it again with args (besides the suite's own,
// startManagerOnce's), then waits until it is ready.
func restartManager(ctx SpecContext, args ...string) {
	start := time.Now()
	defer func() {
		GinkgoWriter.Printf("manager restarted with %v in %s\n", args, time.Since(start).Round(100*time.Millisecond))
	}()
	Expect(manager.Stop(20 * time.Second)).To(Succeed())
	var err error
	manager, err = startManager(managerBin, managerKubeconfig, filepath.Join(workDir, "manager.log"), args...)
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() (int, error) { return httpStatus(http.DefaultClient, manager.probeURL+"/readyz") }).
		WithContext(ctx).WithTimeout(60 * time.Second).Should(Equal(http.StatusOK))
}

// requireSecondaryRealNodes skips the group, with the reason, where a secondary has no real node.
func requireSecondaryRealNodes() {
	for _, c := range bed.Secondaries {
		if c.RealNode == nil {
			Skip(fmt.Sprintf("secondary %s has no real node: %v", c.Name, secondaryRealNodesErr))
		}
	}
}

// enabledNamespace makes a namespace of the primary open to election for a group, and deletes it
// everywhere when the group is done.
func enabledNamespace(ctx SpecContext, ns string) {
	_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, Labels: map[string]string{flotillav1.LabelEnabled: "true"}}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	DeferCleanup(func(ctx SpecContext) { deleteNamespaceEverywhere(ctx, ns) }, NodeTimeout(3*time.Minute))
}

// localGet is the body of a GET of path on this host's port (a kubectl port-forward's), within 5 s.
func localGet(g Gomega, port int, path string) string {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return string(body)
}
