package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/flotilla-dev/flotilla/internal/satoken"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/tunnel"
	"github.com/flotilla-dev/flotilla/pkg/tunnel/hello"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// Pull mode: the bed drops every packet the manager (its process group) and the primary's real
// node's pods send to secondary2's API server, then joins secondary2 with --pull and runs its
// agent there, on its real node, from the chart. What works for a dialled secondary then works
// through the tunnel, and the tunnel's faults look like a silent secondary.
var _ = Describe("a secondary the manager cannot reach, through the tunnel its agent holds", Ordered, Serial, Label("disruptive", "real-nodes", "pull"), func() {
	const ns = "pulled"
	var (
		s1, s2  *testbed.Cluster
		kubectl string
	)
	// spread are the proxies of the Deployment spread over both secondaries, by node.
	spreadOn := func(ctx SpecContext, g Gomega, c *testbed.Cluster) int {
		return runningProxies(ctx, g, ns, "app=spread", flotillav1.VirtualNodeName(c.Name))
	}
	delegateUIDs := func(ctx SpecContext) map[types.UID]string {
		uids := map[types.UID]string{}
		for _, d := range delegatesIn(ctx, s2, ns) {
			uids[d.UID] = d.Name
		}
		return uids
	}
	agentReplicas := func(ctx SpecContext, n int32) {
		_, err := s2.Clientset.AppsV1().Deployments(flotillav1.SystemNamespace).UpdateScale(ctx, "flotilla-agent",
			&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-agent", Namespace: flotillav1.SystemNamespace}, Spec: autoscalingv1.ScaleSpec{Replicas: n}}, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}

	BeforeAll(func(ctx SpecContext) {
		requireSecondaryRealNodes()
		Expect(pullTunnel.address).NotTo(BeEmpty(), "the suite's manager has no tunnel endpoint")
		s1, s2 = bed.Secondaries[0], pulledCluster()
		tools, err := testbed.ToolsDir("")
		Expect(err).NotTo(HaveOccurred())
		kubectl = filepath.Join(tools, "kubectl")
		joinBothSecondaries(ctx)
		importAppImage(ctx, false)
		importManagerImage(ctx, s2)
		enabledNamespace(ctx, ns)
		prepareNamespace(ctx, s2, ns)

		// After the group: the agent goes, the packets flow again, and secondary2 is dialled again
		// (cleanups run last registered first).
		DeferCleanup(func(ctx SpecContext) {
			out, err := helm(ctx, s2, append([]string{"upgrade", "flotilla", "charts/flotilla", "-n", flotillav1.SystemNamespace,
				"--reuse-values", "--wait", "--timeout", "90s"}, agentValues(s2, false)...)...)
			Expect(err).NotTo(HaveOccurred(), out)
			joinBothSecondaries(ctx)
		}, NodeTimeout(3*time.Minute))
		u, err := url.Parse(s2.RESTConfig.Host)
		Expect(err).NotTo(HaveOccurred())
		port, err := strconv.Atoi(u.Port())
		Expect(err).NotTo(HaveOccurred())
		drops := []testbed.Drop{{Port: port, Group: testbed.IsolatedGroup}}
		if bed.RealNode != nil {
			drops = append(drops, testbed.Drop{Port: port, Interface: bed.RealNode.Bridge()})
		}
		lift, err := testbed.DropPackets(ctx, "pull", drops...)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { Expect(lift(ctx)).To(Succeed()) }, NodeTimeout(30*time.Second))
	}, NodeTimeout(5*time.Minute))

	It("joins secondary2 with --pull after proving the manager cannot reach its API server: a direct request times out, the tunnel carries the rest", func(ctx SpecContext) {
		direct := func(isolated bool) (string, error) {
			cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", s2.KubeconfigPath, "get", "--raw", "/version", "--request-timeout", "3s")
			if isolated {
				testbed.InIsolatedGroup()(cmd)
			}
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		out, err := direct(false)
		Expect(err).NotTo(HaveOccurred(), "the API server answers the test: %s", out)
		began := time.Now()
		out, err = direct(true)
		Expect(err).To(HaveOccurred(), "a request from the manager's group went through: %s", out)
		Expect(out).To(MatchRegexp(`(?i)timeout|deadline exceeded`), "dropped, not refused")
		Expect(time.Since(began)).To(BeNumerically(">=", 3*time.Second))

		out, err = flotillactl(ctx, "cluster", "join", "--secondary-context", s2.Name, "--token-duration", "10m",
			"--pull", "--tunnel-address", pullTunnel.address, "--tunnel-ca-file", pullTunnel.caFile)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("Pull mode"))
		Expect(out).NotTo(ContainSubstring("eyJ"), "a token was printed")
		bootstrap := agentToken(ctx, Default, s2)
		claims, err := satoken.Parse(bootstrap)
		Expect(err).NotTo(HaveOccurred())
		Expect(claims.BoundSecret).To(Equal(tunnel.BootstrapSecretName(s2.Name)), "join's credential is bound to its bootstrap Secret")
		out, err = helm(ctx, s2, append([]string{"upgrade", "flotilla", "charts/flotilla", "-n", flotillav1.SystemNamespace,
			"--reuse-values", "--wait", "--timeout", "90s"}, agentValues(s2, true)...)...)
		Expect(err).NotTo(HaveOccurred(), out)
		joined := time.Now()
		Eventually(func(g Gomega) {
			expectPulled(ctx, g, s2.Name)
			expectPlaceableIn(g, ctx, s2.Name)
			expectRunningAndReady(g, ctx, s1.Name)
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("agent running to secondary2 Ready through its tunnel", time.Since(joined).Round(100*time.Millisecond).String())

		// The manager gives the agent a credential of its own, which it renews, and the bootstrap one ends.
		Eventually(func(g Gomega) {
			c, err := satoken.Parse(agentToken(ctx, g, s2))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.BoundSecret).To(BeEmpty())
			g.Expect(c.Expires.Sub(c.IssuedAt)).To(Equal(10*time.Minute), "--agent-credential-lifetime")
			_, err = bed.Primary.Clientset.CoreV1().Secrets(flotillav1.SystemNamespace).Get(ctx, tunnel.BootstrapSecretName(s2.Name), metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the bootstrap Secret: %v", err)
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		// Refused once the API server's cache of accepted tokens (10 s) has let it go.
		Eventually(func(g Gomega) {
			review, err := bed.Primary.Clientset.AuthenticationV1().TokenReviews().Create(ctx,
				&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: bootstrap}}, metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(review.Status.Authenticated).To(BeFalse(), "the bootstrap credential still works")
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
		first := agentToken(ctx, Default, s2)
		Eventually(func(g Gomega) { g.Expect(agentToken(ctx, g, s2)).NotTo(Equal(first)) }).
			WithContext(ctx).WithTimeout(30*time.Second).WithPolling(time.Second).Should(Succeed(), "renewed past 2%% of its life")
		evs, err := bed.Primary.Clientset.EventsV1().Events(flotillav1.SystemNamespace).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(evs.Items).To(ContainElement(And(HaveField("Regarding.Name", s2.Name), HaveField("Reason", flotillav1.ReasonAgentCredentialRotated),
			HaveField("Note", And(ContainSubstring("Gave the agent of "+s2.Name+" a new credential"), Not(ContainSubstring("eyJ")))))))

		out, err = flotillactl(ctx, "cluster", "list")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`(?m)^` + s2.Name + `\s.*pull, tunnel up`))
		Expect(out).NotTo(MatchRegexp(`(?m)^` + s1.Name + `\s.*\bpull\b`))
	}, SpecTimeout(4*time.Minute))

	It("spreads an elected Deployment over both secondaries, secondary2's replicas Running with their status back through the tunnel", func(ctx SpecContext) {
		sel := map[string]string{"app": "spread"}
		_, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "spread"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](4), Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				// The failover taint comes 5 s after the cluster is Unknown: a 10 s cut, with the
				// tunnel's keepalive (10 s) and the agent's reconnection after it, is over before
				// these tolerate it for 30 s; the agent's absence is not.
				ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationFailoverSeconds: "30"}},
				// Spread 2 and 2 as the scheduler spreads over nodes, and free to fail over all to one.
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](5), Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			g.Expect(spreadOn(ctx, g, s1)).To(Equal(2))
			g.Expect(spreadOn(ctx, g, s2)).To(Equal(2))
			proxies, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=spread",
				FieldSelector: "spec.nodeName=" + flotillav1.VirtualNodeName(s2.Name)})
			g.Expect(err).NotTo(HaveOccurred())
			for _, p := range proxies.Items {
				g.Expect(podReady(&p)).To(BeTrue(), "proxy %s", p.Name)
				g.Expect(p.Status.PodIP).NotTo(BeEmpty(), "proxy %s: the delegate's IP", p.Name)
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(delegatesIn(ctx, s2, ns)).To(HaveLen(2))
	}, SpecTimeout(3*time.Minute))

	It("streams kubectl logs, exec and port-forward of a proxy whose delegate runs on secondary2's real node", func(ctx SpecContext) {
		spec := onRealNode(appContainer("talk", nil))
		_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "talk",
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s2.Name}}, Spec: spec}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "talk", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Spec.NodeName).To(Equal(flotillav1.VirtualNodeName(s2.Name)))
			g.Expect(podReady(p)).To(BeTrue(), "proxy talk: %s %s", p.Status.Phase, p.Status.Message)
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())
		args := func(a ...string) []string {
			return append([]string{"--kubeconfig", bed.KubeconfigPath, "--context", testbed.PrimaryName, "-n", ns}, a...)
		}
		dir := GinkgoT().TempDir()
		local, err := testbed.FreePort()
		Expect(err).NotTo(HaveOccurred())
		forward, err := testbed.StartProcess("port-forward", kubectl, args("port-forward", "pod/talk", fmt.Sprintf("%d:8080", local)),
			filepath.Join(dir, "port-forward.log"))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = forward.Stop(5 * time.Second) })

		path := fmt.Sprintf("/through-the-tunnel-%d", time.Now().UnixNano())
		Eventually(func(g Gomega) {
			g.Expect(localGet(g, local, path)).To(ContainSubstring("pod=talk"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			out, err := exec.CommandContext(ctx, kubectl, args("logs", "talk")...).CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), string(out))
			g.Expect(string(out)).To(ContainSubstring("request GET " + path + " from"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		cat := exec.CommandContext(ctx, kubectl, args("exec", "-i", "talk", "--", "cat")...)
		cat.Stdin = strings.NewReader("through the tunnel\n")
		out, err := cat.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(Equal("through the tunnel\n"))
	}, SpecTimeout(3*time.Minute))

	It("imports a Service exported in secondary2 into every cluster, its endpoints and the export's conditions carried through the tunnel", func(ctx SpecContext) {
		f := mcsFixture{ns: ns}
		sel := map[string]string{"app": "hello"}
		_, err := s2.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "hello"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			cl := clientOf(s2)
			Expect(client.IgnoreNotFound(cl.Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"}}))).To(Succeed())
			Expect(client.IgnoreNotFound(cl.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"}}))).To(Succeed())
			Expect(client.IgnoreNotFound(cl.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"}}))).To(Succeed())
		})
		f.export(ctx, s2, "hello", 8080, "http")
		var podIP string
		Eventually(func(g Gomega) {
			pods, err := s2.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=hello"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(HaveLen(1))
			g.Expect(pods.Items[0].Status.PodIP).NotTo(BeEmpty())
			podIP = pods.Items[0].Status.PodIP
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			for _, c := range bed.Clusters() {
				imp := f.importIn(g, ctx, c, "hello")
				g.Expect(imp.Status.Clusters).To(Equal([]mcsv1beta1.ClusterStatus{{Cluster: s2.Name}}), "in %s", c.Name)
				g.Expect(f.endpointsIn(g, ctx, c, "hello")).To(Equal(map[string][]string{s2.Name: {podIP}}), "in %s", c.Name)
			}
			g.Expect(f.exportCondition(g, ctx, s2, "hello", mcsv1beta1.ServiceExportConditionValid).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(f.exportCondition(g, ctx, s2, "hello", mcsv1beta1.ServiceExportConditionReady).Status).To(Equal(metav1.ConditionTrue))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("provisions a flotilla claim in secondary2 for a pod elected there, on secondary2's real node", func(ctx SpecContext) {
		claims := bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns)
		_, err := claims.Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: flotillaClaim(corev1.ReadWriteOnce)}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		c := appContainer("keeper", nil)
		c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		spec := onRealNode(c)
		spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
		_, err = bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "keeper",
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s2.Name}}, Spec: spec}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		var keeper types.UID
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "keeper", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			keeper = p.UID
			g.Expect(p.Spec.NodeName).To(Equal(flotillav1.VirtualNodeName(s2.Name)))
			g.Expect(podReady(p)).To(BeTrue(), "proxy keeper: %s %s", p.Status.Phase, p.Status.Message)
			real, err := s2.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(real.Status.Phase).To(Equal(corev1.ClaimBound))
			claim, err := claims.Get(ctx, "data", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(claim.Status.Phase).To(Equal(corev1.ClaimBound))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		// The pod and its claim go, here and there, before the tunnel's faults.
		Expect(bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, "keeper", metav1.DeleteOptions{})).To(Succeed())
		Expect(claims.Delete(ctx, "data", metav1.DeleteOptions{})).To(Succeed())
		Eventually(func(g Gomega) {
			_, err := s2.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the real claim: %v", err)
			g.Expect(proxyUIDsOn(ctx, ns, s2)).NotTo(ContainElement("keeper"))
			g.Expect(delegatesIn(ctx, s2, ns)).NotTo(ContainElement(HaveField("Annotations", HaveKeyWithValue(flotillav1.AnnotationProxyUID, string(keeper)))))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
	}, SpecTimeout(4*time.Minute))

	It("rides out a 10 s cut of the tunnel: no pod moves, and the manager's watches resume without relisting", func(ctx SpecContext) {
		proxiesBefore := proxyUIDsOn(ctx, ns, s2)
		delegatesBefore := delegateUIDs(ctx)
		Expect(proxiesBefore).To(HaveLen(3), "spread's two and talk")
		listsBefore := listRequests(ctx, s2)
		lift, err := testbed.DropPackets(ctx, "cut", testbed.Drop{Port: tunnelPort(), Interface: s2.RealNode.HostInterface()})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { Expect(lift(ctx)).To(Succeed()) }, NodeTimeout(30*time.Second))
		cutAt := time.Now()
		Consistently(func(g Gomega) {
			g.Expect(proxyUIDsOn(ctx, ns, s2)).To(Equal(proxiesBefore))
		}).WithContext(ctx).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(lift(ctx)).To(Succeed())
		liftedAt := time.Now()
		AddReportEntry("tunnel cut", liftedAt.Sub(cutAt).Round(100*time.Millisecond).String())

		// The watches carry news again: a pod created now in secondary2 is seen Running.
		_, err = bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "after-the-cut",
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s2.Name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			expectPulled(ctx, g, s2.Name)
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "after-the-cut", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("cut lifted to a new pod Running in secondary2", time.Since(liftedAt).Round(100*time.Millisecond).String())
		Expect(proxyUIDsOn(ctx, ns, s2)).To(ContainElement("after-the-cut"))
		for uid, name := range proxiesBefore {
			Expect(proxyUIDsOn(ctx, ns, s2)).To(HaveKeyWithValue(uid, name), "no proxy moved")
		}
		for uid, name := range delegatesBefore {
			Expect(delegateUIDs(ctx)).To(HaveKeyWithValue(uid, name), "no delegate replaced")
		}
		// No relist storm: an informer whose watch broke lists once at most and watches again. Pods and
		// namespaces are also listed live every few seconds (the sweep, the namespace cleanup); the
		// kinds below only the manager's informers list there.
		lists := map[string]int{}
		for resource, n := range listRequests(ctx, s2) {
			if d := n - listsBefore[resource]; d > 0 {
				lists[resource] = d
			}
		}
		AddReportEntry("LIST requests secondary2 served over the cut, by resource", fmt.Sprint(lists))
		for _, resource := range []string{"nodes", "services", "endpointslices", "configmaps", "serviceexports", "persistentvolumeclaims"} {
			Expect(lists[resource]).To(BeNumerically("<=", 1), "%s listed %d times over the cut", resource, lists[resource])
		}
	}, SpecTimeout(3*time.Minute))

	It("fails secondary2 over when its agent stops: NotReady within 30 s, replicas in secondary1 after their bound, and nothing in secondary2 deleted until it answers again", func(ctx SpecContext) {
		delegatesBefore := delegateUIDs(ctx)
		Expect(delegatesBefore).To(HaveLen(4), "spread's two, talk and after-the-cut")
		agentReplicas(ctx, 0)
		stoppedAt := time.Now()
		DeferCleanup(func(ctx SpecContext) { agentReplicas(ctx, 1) })
		Eventually(func(g Gomega) { expectUnknownAndNotReady(g, ctx, s2.Name) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		AddReportEntry("agent stopped to secondary2 NotReady", time.Since(stoppedAt).Round(100*time.Millisecond).String())
		cd, err := detector(ctx, s2.Name)
		Expect(err).NotTo(HaveOccurred())
		Expect(cd.Status.Tunnel).NotTo(BeNil())
		Expect(cd.Status.Tunnel.Connected).To(BeFalse())
		Eventually(func(g Gomega) { g.Expect(spreadOn(ctx, g, s1)).To(Equal(4)) }).
			WithContext(ctx).WithTimeout(120 * time.Second).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("agent stopped to its replicas Running in secondary1", time.Since(stoppedAt).Round(time.Second).String())
		// Fenced: while the manager cannot reach secondary2, nothing there is deleted.
		Expect(delegateUIDs(ctx)).To(Equal(delegatesBefore))

		agentReplicas(ctx, 1)
		backAt := time.Now()
		Eventually(func(g Gomega) { expectPulled(ctx, g, s2.Name) }).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("agent back to secondary2 Ready", time.Since(backAt).Round(100*time.Millisecond).String())
		// Then the stale delegates of the replicas that moved go, and the others stay as they were.
		Eventually(func(g Gomega) {
			now := map[types.UID]string{}
			for _, d := range delegatesIn(ctx, s2, ns) {
				now[d.UID] = d.Name
			}
			g.Expect(now).To(HaveLen(2), "talk's and after-the-cut's delegates")
			for uid, name := range now {
				g.Expect(delegatesBefore).To(HaveKeyWithValue(uid, name))
			}
			for _, name := range []string{"talk", "after-the-cut"} {
				p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "proxy %s", name)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
	}, SpecTimeout(5*time.Minute))

	It("refuses an agent holding secondary1's credential that claims secondary2, naming the cluster it claimed, and keeps secondary2's own tunnel", func(ctx SpecContext) {
		before := expectPulled(ctx, Default, s2.Name).Status.Tunnel.Connects
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: tunnel.AgentServiceAccountPrefix + s1.Name}}
		_, err := bed.Primary.Clientset.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) {
				Expect(bed.Primary.Clientset.CoreV1().ServiceAccounts(sa.Namespace).Delete(ctx, sa.Name, metav1.DeleteOptions{})).To(Succeed())
			})
		}
		tr, err := bed.Primary.Clientset.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		dir := GinkgoT().TempDir()
		tokenFile := filepath.Join(dir, "token")
		Expect(os.WriteFile(tokenFile, []byte(tr.Status.Token), 0o600)).To(Succeed())
		agentLog := filepath.Join(dir, "agent.log")
		impostor, err := testbed.StartProcess("impostor agent", managerBin, []string{"agent", "--cluster", s2.Name,
			"--tunnel-address", pullTunnel.address, "--tunnel-ca-file", pullTunnel.caFile, "--token-file", tokenFile,
			"--upstream", "127.0.0.1:1"}, agentLog)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(impostor.Stop(5 * time.Second)).To(Succeed()) })

		// As the manager logs it, its quotes escaped or not.
		claimed := fmt.Sprintf(`an agent of cluster \\?"%s\\?" claimed cluster \\?"%s\\?"`, s1.Name, s2.Name)
		Eventually(func(g Gomega) {
			raw, err := os.ReadFile(agentLog)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(raw)).To(ContainSubstring("not authorized for this cluster"))
			raw, err = os.ReadFile(manager.LogPath)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(raw)).To(MatchRegexp(claimed))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(string(mustRead(agentLog))).NotTo(ContainSubstring("eyJ"), "the agent logged its token")
		cd := expectPulled(ctx, Default, s2.Name)
		Expect(cd.Status.Tunnel.Connects).To(Equal(before), "the impostor took secondary2's session")
	}, SpecTimeout(2*time.Minute))

	It("refuses 10,000 connections that bring no credential, and holds the manager's memory flat", func(ctx SpecContext) {
		pool := x509.NewCertPool()
		Expect(pool.AppendCertsFromPEM(mustRead(pullTunnel.caFile))).To(BeTrue())
		host, _, err := net.SplitHostPort(pullTunnel.address)
		Expect(err).NotTo(HaveOccurred())
		attempt := func(i int) error {
			d := &net.Dialer{Timeout: 5 * time.Second}
			if i%2 == 1 { // half of them never finish TLS: bytes, then gone
				c, err := d.DialContext(ctx, "tcp", pullTunnel.address)
				if err != nil {
					return err
				}
				_, _ = c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
				return c.Close()
			}
			c, err := tls.DialWithDialer(d, "tcp", pullTunnel.address, &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS13})
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if err := hello.Write(c, hello.Hello{Cluster: s2.Name}); err != nil {
				return err
			}
			if err := hello.ReadReply(bufio.NewReader(c)); err == nil {
				return fmt.Errorf("attempt %d: accepted without a credential", i)
			}
			return nil
		}
		run := func(n int) {
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for range 8 {
				wg.Go(func() {
					for i := int(next.Add(1)); i <= n; i = int(next.Add(1)) {
						if err := attempt(i); err != nil {
							select {
							case errs <- err:
							default:
							}
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			Expect(<-errs).NotTo(HaveOccurred())
		}
		run(500) // the manager's pools and buffers at their working size first
		before := residentBytes(manager.PID())
		began := time.Now()
		run(10000)
		took := time.Since(began)
		after := residentBytes(manager.PID())
		AddReportEntry("manager's resident memory before and after 10,000 attempts", fmt.Sprintf("%d MiB, %d MiB in %s", before>>20, after>>20, took.Round(time.Second)))
		Expect(after).To(BeNumerically("<", before+32<<20), "resident memory grew from %d to %d bytes", before, after)
		expectPulled(ctx, Default, s2.Name)
	}, SpecTimeout(3*time.Minute))

	It("drains secondary2 through the tunnel: its replicas move to secondary1, its bare pods are evicted with --force, and it is cordoned until uncordoned", func(ctx SpecContext) {
		_, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Patch(ctx, "spread", types.MergePatchType, []byte(`{"spec":{"replicas":6}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			g.Expect(spreadOn(ctx, g, s1) + spreadOn(ctx, g, s2)).To(Equal(6))
			g.Expect(spreadOn(ctx, g, s2)).To(BeNumerically(">=", 1), "new replicas in secondary2")
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			out, err := flotillactl(ctx, "cluster", "uncordon", s2.Name)
			Expect(err).NotTo(HaveOccurred(), out)
		})
		out, err := flotillactl(ctx, "cluster", "drain", s2.Name, "--force", "--timeout", "120s")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("Drained " + s2.Name))
		Eventually(func(g Gomega) {
			g.Expect(spreadOn(ctx, g, s1)).To(Equal(6))
			g.Expect(delegatesIn(ctx, s2, ns)).To(BeEmpty(), "delegates left in %s", s2.Name)
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, flotillav1.VirtualNodeName(s2.Name), metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(n.Spec.Unschedulable).To(BeTrue())
	}, SpecTimeout(5*time.Minute))
})

// proxyUIDsOn maps the UIDs of a namespace's live proxies on a secondary's virtual node to their
// names.
func proxyUIDsOn(ctx context.Context, ns string, c *testbed.Cluster) map[types.UID]string {
	pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + flotillav1.VirtualNodeName(c.Name)})
	Expect(err).NotTo(HaveOccurred())
	uids := map[types.UID]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			uids[p.UID] = p.Name
		}
	}
	return uids
}

// tunnelPort is the port of the manager's tunnel endpoint.
func tunnelPort() int {
	_, p, err := net.SplitHostPort(pullTunnel.address)
	Expect(err).NotTo(HaveOccurred())
	port, err := strconv.Atoi(p)
	Expect(err).NotTo(HaveOccurred())
	return port
}

// mustRead reads a file the spec wrote or a process it started writes.
func mustRead(path string) []byte {
	raw, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	return raw
}
