package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/promrules"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// managerImage is the image the suite builds from managerBin, as make image does, and imports
// into the real node's containerd.
// nginxProxies selects the proxies of config/samples/elected-nginx.yaml.
const nginxProxies = "app=nginx," + flotillav1.LabelProxy + "=true"

const (
	managerImageRepo = "flotilla.test/flotilla-manager"
	managerImageTag  = "e2e"
)

// inClusterValues are the chart values of the in-cluster install: the suite's image, present on the
// node (nothing can be pulled here), on the real node (kwok would only pretend to run it on the
// fake one) whose taint it tolerates.
func inClusterValues(extra ...string) []string {
	values := fmt.Sprintf(`replicator: {enabled: true}
multiclusterServices: {enabled: true}
manager:
  enabled: true
  image: {repository: %s, tag: %s, pullPolicy: Never}
  logLevel: debug
  nodeSelector: {%q: "true"}
  tolerations: [{key: %q, operator: Exists, effect: NoSchedule}]
`, managerImageRepo, managerImageTag, testbed.RealNodeKey, testbed.RealNodeKey)
	path := filepath.Join(workDir, "in-cluster-values.yaml")
	Expect(os.WriteFile(path, []byte(values), 0o600)).To(Succeed())
	return append([]string{"-f", path}, extra...)
}

// managerPods lists the chart's manager pods.
// managerPodSelector selects the chart's manager pods (and its uninstall hook's).
const managerPodSelector = "app.kubernetes.io/name=flotilla,app.kubernetes.io/instance=flotilla"

func managerPods(ctx context.Context) []corev1.Pod {
	pods, err := bed.Primary.Clientset.CoreV1().Pods(flotillav1.SystemNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: managerPodSelector})
	Expect(err).NotTo(HaveOccurred())
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Labels["app.kubernetes.io/component"] != "uninstall" {
			live = append(live, p)
		}
	}
	return live
}

// leaderPod is the manager pod holding the leader Lease ("" while none does).
func leaderPod(ctx context.Context) string {
	var l coordinationv1.Lease
	if err := clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: flotillav1.ManagerLeaseName}, &l); err != nil {
		return ""
	}
	holder := ptr.Deref(l.Spec.HolderIdentity, "")
	// controller-runtime's identity is <hostname>_<uid>; a pod's hostname is its name.
	name, _, _ := strings.Cut(holder, "_")
	return name
}

// failedCreates counts the FailedCreate Events of a namespace's ReplicaSets: each is a pod the
// API server refused (here: a webhook call that failed or refused).
func failedCreates(ctx context.Context, ns string) (int, string) {
	evs, err := bed.Primary.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
	Expect(err).NotTo(HaveOccurred())
	n, last := 0, ""
	for _, e := range evs.Items {
		n += int(max(e.Count, 1))
		last = e.Message
	}
	return n, last
}

var _ = Describe("the manager in cluster, installed by the chart", Ordered, Serial, Label("disruptive", "real-nodes"), func() {
	const ns = "in-cluster"
	var previous testbed.PreviousRelease
	BeforeAll(func(ctx SpecContext) {
		if bed.RealNode == nil {
			if why := os.Getenv("FLOTILLA_E2E_NO_REAL_NODE"); why != "" {
				Skip("no real node in the bed: " + why)
			}
			Fail(fmt.Sprintf("the bed has no real node (%v); set FLOTILLA_E2E_NO_REAL_NODE=<why> to skip these specs knowingly", realNodeErr))
		}
		var err error
		previous, err = testbed.Previous("")
		Expect(err).NotTo(HaveOccurred())
		// Out of cluster until now: that manager goes, the previous release's chart takes over
		// what it left, in cluster; the first spec upgrades it to this code.
		Expect(manager.Stop(20 * time.Second)).To(Succeed())
		DeferCleanup(backToOutOfCluster, NodeTimeout(4*time.Minute))
		installPrevious(ctx, previous)
		// The pods reach the secondaries at the host's address, not the kubeconfigs' 127.0.0.1.
		for _, c := range bed.Secondaries {
			out, err := flotillactl(ctx, "cluster", "join", "--secondary-context", c.Name, "--token-duration", "10m", "--server", serverAtHostIP(c))
			Expect(err).NotTo(HaveOccurred(), out)
		}
		_, err = bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{flotillav1.LabelEnabled: "true"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}, NodeTimeout(4*time.Minute))

	JustAfterEach(func(ctx SpecContext) {
		if !CurrentSpecReport().Failed() {
			return
		}
		// The pods' logs go with the real node's teardown: keep them with the work dir.
		for _, p := range managerPods(ctx) {
			for _, previous := range []bool{false, true} {
				out, _ := kubectlIn(ctx, flotillav1.SystemNamespace, nil, "logs", p.Name, fmt.Sprintf("--previous=%t", previous))
				path := filepath.Join(workDir, fmt.Sprintf("pod-%s-previous-%t.log", p.Name, previous))
				_ = os.WriteFile(path, []byte(out), 0o600)
			}
		}
	})

	It("is upgraded from the previous release under load, then rolled out again: no delegate restarts, every proxy stays Running and Ready (sampled every 200 ms), no elected pod creation is refused (2 a second) but by a stopping replica of the previous release, none at all in this code's rollout, no Replicator rewrites an unchanged object", func(ctx SpecContext) {
		upgradeUnderLoad(ctx, previous)
	}, SpecTimeout(12*time.Minute))

	It("runs 2 replicas of the built image, Ready within 30 s with no probe failed once Ready, one leader, the webhook through its Service, virtual nodes at the leader pod's IP", func(ctx SpecContext) {
		upgradeToCurrent(ctx)
		pods := managerPods(ctx)
		Expect(pods).To(HaveLen(2))
		for _, p := range pods {
			Expect(p.Spec.NodeName).To(Equal(bed.RealNode.Name))
			Expect(p.Spec.Containers[0].Image).To(Equal(managerImageRepo + ":" + managerImageTag))
			Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero(), "pod %s restarted", p.Name)
		}
		evs, err := bed.Primary.Clientset.CoreV1().Events(flotillav1.SystemNamespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=Unhealthy"})
		Expect(err).NotTo(HaveOccurred())
		for _, p := range pods {
			started, ready := startedAndReady(p)
			Expect(ready).NotTo(BeZero(), "pod %s is not Ready", p.Name)
			AddReportEntry("manager pod Ready after its container started", fmt.Sprintf("%s: %s", p.Name, ready.Sub(started)))
			Expect(ready.Sub(started)).To(BeNumerically("<=", managerReadyWithin), "pod %s Ready %s after its container started", p.Name, ready.Sub(started))
			Expect(unexpectedProbeFailures(evs.Items, p.Name, ready)).To(BeEmpty(), "a probe of the manager failed other than while it started")
		}

		var cfg admissionregistrationv1.MutatingWebhookConfiguration
		Eventually(func(g Gomega) {
			g.Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Name: flotillav1.WebhookConfigurationName}, &cfg)).To(Succeed())
			g.Expect(cfg.Webhooks[0].ClientConfig.URL).To(BeNil())
			g.Expect(cfg.Webhooks[0].ClientConfig.Service).NotTo(BeNil())
			g.Expect(cfg.Webhooks[0].ClientConfig.Service.Name).To(Equal("flotilla-webhook"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		// What the chart's ServiceMonitor does: each replica's metrics, verified against the CA
		// the manager publishes, for the metrics Service's name.
		for _, p := range pods {
			Expect(scrapeVerifiedInCluster(ctx, p.Name)).To(ContainSubstring("flotilla_build_info"), "pod %s", p.Name)
		}

		Eventually(func(g Gomega) {
			leader := leaderPod(ctx)
			g.Expect(leader).NotTo(BeEmpty())
			var ip string
			for _, p := range managerPods(ctx) {
				if p.Name == leader {
					ip = p.Status.PodIP
				}
			}
			g.Expect(ip).NotTo(BeEmpty(), "the leader %s is not one of the chart's pods", leader)
			for _, c := range bed.Secondaries {
				expectRunningAndReady(g, ctx, c.Name)
				n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, flotillav1.VirtualNodeName(c.Name), metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(n.Status.Addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}))
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("runs the 10-replica elected nginx over both secondaries; kubectl logs and exec on a proxy reach the delegate through the manager pod", func(ctx SpecContext) {
		raw, err := os.ReadFile(filepath.Join(repoRoot(), "config", "samples", "elected-nginx.yaml"))
		Expect(err).NotTo(HaveOccurred())
		out, err := kubectlIn(ctx, ns, raw, "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func(g Gomega) {
			g.Expect(runningProxies(ctx, g, ns, nginxProxies, "")).To(Equal(10))
			for _, c := range bed.Secondaries {
				// Spread: 5 each, give or take what the other webhook replica admitted before
				// this one's cache showed it: in a burst of 10, up to two (7 and 3 seen once).
				g.Expect(podsInPhase(delegatesIn(ctx, c, ns), corev1.PodRunning)).To(BeNumerically("~", 5, 2), "delegates running in %s", c.Name)
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())

		pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=nginx"})
		Expect(err).NotTo(HaveOccurred())
		proxy := pods.Items[0]
		cluster := proxy.Spec.NodeName[len(flotillav1.VirtualNodePrefix):]
		Eventually(func() (string, error) {
			// The whole log: kwok serves one file per bed, to which other specs (attach) add lines.
			return kubectlIn(ctx, ns, nil, "logs", proxy.Name)
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(ContainSubstring(testbed.PodLogLine(cluster)))
		out, err = kubectlIn(ctx, ns, nil, "exec", proxy.Name, "--", "echo", "hello-through-the-manager-pod")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("hello-through-the-manager-pod"))
	}, SpecTimeout(3*time.Minute))

	It("loses no elected pod when the leader pod is deleted during a 100-pod rollout", func(ctx SpecContext) {
		_, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Patch(ctx, "nginx", types.MergePatchType,
			[]byte(`{"spec":{"replicas":100}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		start := time.Now()
		Eventually(func(g Gomega) int { return runningProxies(ctx, g, ns, nginxProxies, "") }).
			WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).Should(BeNumerically(">=", 25))
		leader := leaderPod(ctx)
		Expect(leader).NotTo(BeEmpty())
		Expect(bed.Primary.Clientset.CoreV1().Pods(flotillav1.SystemNamespace).Delete(ctx, leader, metav1.DeleteOptions{})).To(Succeed())
		Eventually(func(g Gomega) int { return runningProxies(ctx, g, ns, nginxProxies, "") }).
			WithContext(ctx).WithTimeout(3 * time.Minute).Should(Equal(100))
		AddReportEntry("100 elected pods Running with the leader pod deleted during the rollout", time.Since(start).Round(time.Second).String())
		n, last := failedCreates(ctx, ns)
		Expect(n).To(BeZero(), "refused creations, the last: %s", last)
		Eventually(func() string { return leaderPod(ctx) }).WithContext(ctx).WithTimeout(60 * time.Second).
			ShouldNot(Or(BeEmpty(), Equal(leader)))
	}, SpecTimeout(5*time.Minute))

	It("takes a flag through extraArgs and a CRD change at helm upgrade", func(ctx SpecContext) {
		chart := filepath.Join(GinkgoT().TempDir(), "flotilla")
		Expect(exec.CommandContext(ctx, "cp", "-r", filepath.Join(repoRoot(), "charts", "flotilla"), chart).Run()).To(Succeed())
		crd := filepath.Join(chart, "templates", "crds", "flotilla.dev_clusterdetectors.yaml")
		raw, err := os.ReadFile(crd)
		Expect(err).NotTo(HaveOccurred())
		// A printer column the installed CRD does not have.
		const marker = "additionalPrinterColumns:\n"
		Expect(string(raw)).To(ContainSubstring(marker))
		raw = []byte(strings.Replace(string(raw), marker, marker+
			"    - jsonPath: .metadata.uid\n      name: Upgraded\n      type: string\n      priority: 1\n", 1))
		Expect(os.WriteFile(crd, raw, 0o600)).To(Succeed())

		out, err := helm(ctx, bed.Primary, append([]string{"upgrade", "flotilla", chart, "-n", flotillav1.SystemNamespace,
			"--wait", "--timeout", "90s"}, inClusterValues("--set", "manager.extraArgs={--proxy-workers=48}")...)...)
		Expect(err).NotTo(HaveOccurred(), "helm upgrade: %s", out)
		Eventually(func(g Gomega) {
			pods := managerPods(ctx)
			g.Expect(pods).To(HaveLen(2))
			for _, p := range pods {
				g.Expect(p.Spec.Containers[0].Args).To(ContainElement("--proxy-workers=48"))
				g.Expect(podReady(&p)).To(BeTrue(), "pod %s", p.Name)
			}
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
		var got apiextensionsv1.CustomResourceDefinition
		Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Name: "clusterdetectors.flotilla.dev"}, &got)).To(Succeed())
		Expect(got.Spec.Versions[0].AdditionalPrinterColumns).To(ContainElement(HaveField("Name", "Upgraded")))
		// Elected pods still run through the new replicas.
		Eventually(func(g Gomega) int { return runningProxies(ctx, g, ns, nginxProxies, "") }).
			WithContext(ctx).WithTimeout(60 * time.Second).Should(Equal(100))
	}, SpecTimeout(4*time.Minute))

	It("takes the webhook's serving certificate from cert-manager with its CA injector (webhook.certManager.enabled), and elects through it", func(ctx SpecContext) {
		dir := filepath.Join(workDir, "cert-manager-in-cluster")
		cm, err := testbed.StartCertManager(ctx, bed.Primary, "", dir)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(cm.Stop(10 * time.Second)).To(Succeed()) })
		injector, err := testbed.StartCAInjector(bed.Primary, "", dir)
		Expect(err).NotTo(HaveOccurred())
		injectorStopped := false
		DeferCleanup(func() {
			if !injectorStopped {
				Expect(injector.Stop(10 * time.Second)).To(Succeed())
			}
		})

		out, err := helm(ctx, bed.Primary, append([]string{"upgrade", "flotilla", "charts/flotilla", "-n", flotillav1.SystemNamespace,
			"--wait", "--timeout", "2m"}, inClusterValues("--set", "webhook.certManager.enabled=true")...)...)
		Expect(err).NotTo(HaveOccurred(), "helm upgrade: %s", out)
		var tls corev1.Secret
		Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: flotillav1.WebhookTLSSecretName}, &tls)).To(Succeed())
		Expect(tls.Data).To(HaveKey("ca.crt"))
		// The manager annotated the configuration; cert-manager's injector wrote the CA of its
		// Certificate into every webhook of it.
		Eventually(func(g Gomega) {
			g.Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: flotillav1.WebhookTLSSecretName}, &tls)).To(Succeed())
			var cfg admissionregistrationv1.MutatingWebhookConfiguration
			g.Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Name: flotillav1.WebhookConfigurationName}, &cfg)).To(Succeed())
			g.Expect(cfg.Annotations).To(HaveKeyWithValue(flotillav1.AnnotationInjectCAFrom, flotillav1.SystemNamespace+"/"+flotillav1.WebhookCertificateName))
			// cainjector merges (its CAInjectorMerging default): the CA of before stays beside
			// cert-manager's until it expires, so the rollout never breaks admission.
			want := certSummary(tls.Data["ca.crt"])
			g.Expect(want).To(HaveLen(1))
			for _, w := range cfg.Webhooks {
				g.Expect(certSummary(w.ClientConfig.CABundle)).To(ContainElement(want[0]), "webhook %s", w.Name)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		for _, p := range managerPods(ctx) {
			Expect(p.Spec.Containers[0].Args).To(ContainElement("--webhook-ca-injected-from=" + flotillav1.SystemNamespace + "/" + flotillav1.WebhookCertificateName))
		}
		// An elected pod is admitted through the certificate cert-manager issued.
		_, err = bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "through-cert-manager",
			Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() (corev1.PodPhase, error) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "through-cert-manager", metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return p.Status.Phase, nil
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Equal(corev1.PodRunning))

		// And back to the manager's own CA (the injector stopped first: nothing writes the
		// bundle behind the manager's back).
		Expect(injector.Stop(10 * time.Second)).To(Succeed())
		injectorStopped = true
		out, err = helm(ctx, bed.Primary, append([]string{"upgrade", "flotilla", "charts/flotilla", "-n", flotillav1.SystemNamespace,
			"--wait", "--timeout", "2m"}, inClusterValues()...)...)
		Expect(err).NotTo(HaveOccurred(), "helm upgrade: %s", out)
		Eventually(func(g Gomega) {
			var cfg admissionregistrationv1.MutatingWebhookConfiguration
			g.Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Name: flotillav1.WebhookConfigurationName}, &cfg)).To(Succeed())
			g.Expect(cfg.Annotations).NotTo(HaveKey(flotillav1.AnnotationInjectCAFrom))
			g.Expect(certSummary(cfg.Webhooks[0].ClientConfig.CABundle)).NotTo(ContainElement(certSummary(tls.Data["ca.crt"])[0]))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		Expect(bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, "through-cert-manager", metav1.DeleteOptions{})).To(Succeed())
		_, err = bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "through-own-ca",
			Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, "through-own-ca", metav1.DeleteOptions{})).To(Succeed())
	}, SpecTimeout(6*time.Minute))

	It("fires FlotillaWebhookUnreachable, from the API server's own metrics, while the webhook's Service has no endpoints and the manager's pods run and lead; resolves once it has them again", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		rules := renderAlertRules(ctx, dir)
		outside := []string{"FlotillaManagerDown", "FlotillaNoLeader", "FlotillaWebhookUnreachable", "FlotillaWebhookSlow"}
		// What Prometheus holds at a moment: the API server's view of the webhooks, and up and
		// the leader metric as the manager's pods are (they run throughout).
		scrape := func(name string) string {
			var b strings.Builder
			b.WriteString(apiserverWebhookFamilies(ctx))
			b.WriteString("# TYPE up gauge\n")
			for _, p := range managerPods(ctx) {
				fmt.Fprintf(&b, "up{job=\"flotilla-manager-metrics\",pod=%q} %d\n", p.Name, map[bool]int{true: 1}[podReady(&p)])
			}
			// A rollout of the spec before may have just moved the Lease: wait for its holder.
			var leader string
			Eventually(func() string { leader = leaderPod(ctx); return leader }).
				WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).ShouldNot(BeEmpty())
			fmt.Fprintf(&b, "# TYPE leader_election_master_status gauge\nleader_election_master_status{name=%q,pod=%q} 1\n", flotillav1.ManagerLeaseName, leader)
			file := filepath.Join(dir, name)
			Expect(os.WriteFile(file, []byte(b.String()), 0o600)).To(Succeed())
			return file
		}
		elected := func(name string) error {
			_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name,
				Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](0), Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}},
				metav1.CreateOptions{})
			return err
		}
		scrapes := []string{scrape("healthy.prom")}

		By("the webhook's Service selects no pod: the API server cannot call the webhook")
		services := bed.Primary.Clientset.CoreV1().Services(flotillav1.SystemNamespace)
		_, err := services.Patch(ctx, "flotilla-webhook", types.MergePatchType, []byte(`{"spec":{"selector":{"e2e.flotilla.dev/nowhere":"true"}}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		restored := false
		restore := func(ctx context.Context) {
			if !restored {
				_, err := services.Patch(ctx, "flotilla-webhook", types.MergePatchType, []byte(`{"spec":{"selector":{"e2e.flotilla.dev/nowhere":null}}}`), metav1.PatchOptions{})
				Expect(err).NotTo(HaveOccurred())
				restored = true
			}
		}
		DeferCleanup(restore)
		for i := range 3 {
			Eventually(func() error { return elected(fmt.Sprintf("no-endpoints-%d-%d", i, time.Now().UnixNano())) }).
				WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).
				Should(MatchError(ContainSubstring(`failed calling webhook "pods.flotilla.dev"`)))
			scrapes = append(scrapes, scrape(fmt.Sprintf("no-endpoints-%d.prom", i)))
		}
		// As in the spec of the stopped manager: the refusals' counter may be new at the first
		// scrape without endpoints, and its rise is seen from the second.
		alerts, err := promrules.EvalScrapes(ctx, rules, scrapes, 2*time.Minute, 5*time.Minute+30*time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(firingOf(alerts, outside...)).To(ConsistOf("FlotillaWebhookUnreachable"), "3.5 minutes without endpoints, the manager up and leading")

		By("the Service selects the manager's pods again: admitted, and the alert resolves")
		restore(ctx)
		Eventually(func() error { return elected(fmt.Sprintf("endpoints-back-%d", time.Now().UnixNano())) }).
			WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		alerts, err = promrules.EvalScrapes(ctx, rules, append(scrapes, scrape("back.prom")), 2*time.Minute, 16*time.Minute)
		Expect(err).NotTo(HaveOccurred())
		Expect(firingOf(alerts, outside...)).To(BeEmpty(), "8 minutes after the endpoints came back")
	}, SpecTimeout(3*time.Minute))

	It("uninstalls: refused with nothing changed while elected pods exist; after the documented steps no webhook, finalizer or Flotilla object is left, and ordinary pods create", func(ctx SpecContext) {
		// The dry run first: each object by the name the chart's manager gives it, and the refusal.
		out, err := flotillactl(ctx, "uninstall", "--dry-run", "-o", "json")
		Expect(err).To(HaveOccurred(), "the dry run would go ahead with elected pods: %s", out)
		var plan struct {
			Kind                 string   `json:"kind"`
			Deployment           string   `json:"deployment"`
			WebhookConfiguration string   `json:"webhookConfiguration"`
			ConfigMaps           []string `json:"configMaps"`
			Lease                string   `json:"lease"`
			Refusal              string   `json:"refusal"`
		}
		Expect(json.NewDecoder(strings.NewReader(out[strings.Index(out, "{"):])).Decode(&plan)).To(Succeed(), out)
		Expect(plan.Kind).To(Equal("UninstallPlan"))
		Expect(plan.Deployment).To(Equal(flotillav1.SystemNamespace + "/" + flotillav1.ManagerDeploymentName))
		Expect(plan.WebhookConfiguration).To(Equal(flotillav1.WebhookConfigurationName))
		Expect(plan.ConfigMaps).To(ConsistOf(flotillav1.SystemNamespace + "/" + flotillav1.NamesFrom("").CAConfigMap))
		Expect(plan.Lease).To(Equal(flotillav1.SystemNamespace + "/" + flotillav1.ManagerLeaseName))
		Expect(plan.Refusal).To(ContainSubstring("still in use"))
		Expect(managerPods(ctx)).To(HaveLen(2), "the dry run stopped the manager")

		out, err = helm(ctx, bed.Primary, "uninstall", "flotilla", "-n", flotillav1.SystemNamespace, "--wait", "--timeout", "2m")
		Expect(err).To(HaveOccurred(), "uninstall went ahead with 100 elected pods: %s", out)
		Expect(out).To(ContainSubstring("job flotilla-uninstall failed"))
		logs, _ := kubectlIn(ctx, flotillav1.SystemNamespace, nil, "logs", "job/flotilla-uninstall")
		Expect(logs).To(ContainSubstring("still in use"))
		Expect(managerPods(ctx)).To(HaveLen(2))
		Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Name: flotillav1.WebhookConfigurationName}, &admissionregistrationv1.MutatingWebhookConfiguration{})).To(Succeed())

		// The documented steps: delete the elected workloads and the Replicators (this spec's and
		// whatever other specs left), then uninstall.
		deleteElectedWorkloads(ctx)
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(clientOf(bed.Primary).List(ctx, &pods, client.HasLabels{flotillav1.LabelProxy})).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
			var reps flotillav1.ReplicatorList
			g.Expect(clientOf(bed.Primary).List(ctx, &reps)).To(Succeed())
			g.Expect(reps.Items).To(BeEmpty(), "Replicators of other specs are left")
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
		out, err = helm(ctx, bed.Primary, "uninstall", "flotilla", "-n", flotillav1.SystemNamespace, "--wait", "--timeout", "2m")
		Expect(err).NotTo(HaveOccurred(), "helm uninstall: %s", out)

		cl := clientOf(bed.Primary)
		Expect(apierrors.IsNotFound(cl.Get(ctx, client.ObjectKey{Name: flotillav1.WebhookConfigurationName}, &admissionregistrationv1.MutatingWebhookConfiguration{}))).To(BeTrue())
		var nodes corev1.NodeList
		Expect(cl.List(ctx, &nodes, client.HasLabels{flotillav1.LabelCluster})).To(Succeed())
		Expect(nodes.Items).To(BeEmpty())
		var cds flotillav1.ClusterDetectorList
		Expect(cl.List(ctx, &cds)).To(Succeed())
		Expect(cds.Items).To(BeEmpty())
		for _, name := range []string{flotillav1.WebhookCASecretName, flotillav1.KubeconfigSecretName} {
			Expect(apierrors.IsNotFound(cl.Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: name}, &corev1.Secret{}))).To(BeTrue(), name)
		}
		Expect(apierrors.IsNotFound(cl.Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: flotillav1.ManagerLeaseName}, &coordinationv1.Lease{}))).To(BeTrue())
		Expect(apierrors.IsNotFound(cl.Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: flotillav1.NamesFrom("").CAConfigMap}, &corev1.ConfigMap{}))).
			To(BeTrue(), "the ConfigMap publishing the CA is left")
		var left corev1.PodList
		Expect(cl.List(ctx, &left, client.InNamespace(flotillav1.SystemNamespace))).To(Succeed())
		Expect(left.Items).To(BeEmpty(), "pods of the release or its hook are left")
		// The CRDs stay (resource policy keep): users' Replicators are not deleted by an uninstall.
		Expect(cl.Get(ctx, client.ObjectKey{Name: "replicators.flotilla.dev"}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed())

		// An ordinary pod, and an elected one in an enabled namespace: nothing intercepts them now.
		for _, p := range []*corev1.Pod{
			{ObjectMeta: metav1.ObjectMeta{Name: "plain"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "once-elected", Annotations: map[string]string{flotillav1.AnnotationElect: ""}}},
		} {
			// No grace: only a finalizer left behind could hold them, and the namespace, now.
			p.Spec.Containers, p.Spec.TerminationGracePeriodSeconds = []corev1.Container{{Name: "c", Image: "busybox"}}, ptr.To[int64](0)
			_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(bed.Primary.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() bool {
			_, err := bed.Primary.Clientset.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).WithContext(ctx).WithTimeout(90*time.Second).Should(BeTrue(), "the namespace hangs Terminating")
	}, SpecTimeout(8*time.Minute))
})

// backToOutOfCluster restores what the other specs expect: the chart with manager.enabled=false
// and the manager on the host, both secondaries joined.
func backToOutOfCluster(ctx SpecContext) {
	status, err := helm(ctx, bed.Primary, "status", "flotilla", "-n", flotillav1.SystemNamespace)
	switch {
	case err == nil && strings.Contains(status, "STATUS: deployed"):
		// Still installed (a spec failed before the uninstall): the host manager takes over.
		out, err := helm(ctx, bed.Primary, slices.Concat([]string{"upgrade", "flotilla", "charts/flotilla", "-n", flotillav1.SystemNamespace, "--wait"},
			outOfClusterValues)...)
		Expect(err).NotTo(HaveOccurred(), "helm upgrade: %s", out)
	case err == nil:
		// Stuck after a refused uninstall (a spec failed between the two): no hook this time.
		out, err := helm(ctx, bed.Primary, "uninstall", "flotilla", "-n", flotillav1.SystemNamespace, "--no-hooks", "--wait")
		Expect(err).NotTo(HaveOccurred(), "helm uninstall --no-hooks: %s", out)
		fallthrough
	default:
		out, err := helm(ctx, bed.Primary, slices.Concat([]string{"install", "flotilla", "charts/flotilla", "-n", flotillav1.SystemNamespace, "--wait"},
			outOfClusterValues)...)
		Expect(err).NotTo(HaveOccurred(), "helm install: %s", out)
	}
	Expect(serviceAccountKubeconfig(ctx, bed.Primary, flotillav1.SystemNamespace, "flotilla", managerKubeconfig)).To(Succeed())
	manager, err = startManager(managerBin, managerKubeconfig, filepath.Join(workDir, "manager-after-in-cluster.log"))
	Expect(err).NotTo(HaveOccurred())
	joinBothSecondaries(ctx)
}

// deleteElectedWorkloads does what docs/install.md#uninstall asks before helm uninstall: delete
// what owns each elected pod (a Deployment rather than its ReplicaSet), bare elected pods, and
// every Replicator.
func deleteElectedWorkloads(ctx context.Context) {
	cl := clientOf(bed.Primary)
	var proxies corev1.PodList
	Expect(cl.List(ctx, &proxies, client.HasLabels{flotillav1.LabelProxy})).To(Succeed())
	background := client.PropagationPolicy(metav1.DeletePropagationBackground)
	for i := range proxies.Items {
		p := &proxies.Items[i]
		owner := metav1.GetControllerOf(p)
		var target client.Object = p
		switch {
		case owner == nil:
		case owner.Kind == "ReplicaSet":
			var rs appsv1.ReplicaSet
			err := cl.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: owner.Name}, &rs)
			if apierrors.IsNotFound(err) {
				continue // its Deployment was deleted for another of its pods
			}
			Expect(err).NotTo(HaveOccurred())
			target = &rs
			if d := metav1.GetControllerOf(&rs); d != nil && d.Kind == "Deployment" {
				target = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: d.Name}}
			}
		case owner.Kind == "StatefulSet":
			target = &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: owner.Name}}
		case owner.Kind == "Job":
			target = &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: owner.Name}}
		default:
			GinkgoWriter.Printf("deleting elected pod %s/%s itself (owner %s %s)\n", p.Namespace, p.Name, owner.Kind, owner.Name)
		}
		Expect(client.IgnoreNotFound(cl.Delete(ctx, target, background))).To(Succeed())
	}
	var reps flotillav1.ReplicatorList
	Expect(cl.List(ctx, &reps)).To(Succeed())
	for i := range reps.Items {
		Expect(client.IgnoreNotFound(cl.Delete(ctx, &reps.Items[i]))).To(Succeed())
	}
}

// kubectlIn runs the bed's kubectl against the primary in a namespace ("": the default one), with
// stdin when given.
func kubectlIn(ctx context.Context, ns string, stdin []byte, args ...string) (string, error) {
	tools, err := testbed.ToolsDir("")
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	full := []string{"--kubeconfig", bed.KubeconfigPath, "--context", testbed.PrimaryName}
	if ns != "" {
		full = append(full, "-n", ns)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(tools, "kubectl"), append(full, args...)...)
	if stdin != nil {
		cmd.Stdin = strings.NewReader(string(stdin))
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// podReady says whether a pod's Ready condition is true.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// certSummary names the certificates of a PEM bundle (subject, issuer, DNS names, serial), so
// that a mismatch says which certificate is where.
func certSummary(bundle []byte) []string {
	var out []string
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return out
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			out = append(out, "unparsable: "+err.Error())
			continue
		}
		out = append(out, fmt.Sprintf("subject=%q issuer=%q dns=%v serial=%s", c.Subject.String(), c.Issuer.String(), c.DNSNames, c.SerialNumber))
	}
}

// managerReadyWithin bounds a manager pod's start, from its container's start to Ready: the
// process listens within a few seconds and is ready once it has read the registration Secret
// and probed each cluster once.
const managerReadyWithin = 30 * time.Second

// startedAndReady returns when a pod's first container started and when the pod last became
// Ready (zero while it is not).
func startedAndReady(p corev1.Pod) (started, ready time.Time) {
	if len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil {
		started = p.Status.ContainerStatuses[0].State.Running.StartedAt.Time
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			ready = c.LastTransitionTime.Time
		}
	}
	return started, ready
}

// unexpectedProbeFailures returns a pod's failed-probe Events but those its start explains. The
// kubelet probes from the container's start, and records an Event for every failure: a startup
// probe refused because the process is not listening yet (a CI run's binary took 3 s to its
// health server on a loaded node), and a readiness probe answered 500 before the pod's first
// Ready (the manager says not ready until it has read the registration Secret) are what those
// probes are for. A liveness failure, a timeout, any other answer, or a readiness failure after
// Ready is a real one.
func unexpectedProbeFailures(events []corev1.Event, pod string, ready time.Time) []corev1.Event {
	var failed []corev1.Event
	for _, ev := range events {
		if ev.InvolvedObject.Name != pod {
			continue
		}
		starting := strings.HasPrefix(ev.Message, "Startup probe failed:") && strings.HasSuffix(ev.Message, "connect: connection refused")
		notReadyYet := strings.HasPrefix(ev.Message, "Readiness probe failed: HTTP probe failed with statuscode: 500") &&
			!ev.LastTimestamp.After(ready)
		if !starting && !notReadyYet {
			failed = append(failed, ev)
		}
	}
	return failed
}

// scrapeVerifiedInCluster scrapes the metrics of the manager pod through a port-forward as the
// chart's ServiceMonitor would: a scraper's token, TLS verified against the ConfigMap flotilla-ca
// for the name flotilla-manager-metrics.flotilla-system.svc.
func scrapeVerifiedInCluster(ctx SpecContext, pod string) string {
	names := flotillav1.NamesFrom("")
	cm, err := bed.Primary.Clientset.CoreV1().ConfigMaps(flotillav1.SystemNamespace).Get(ctx, names.CAConfigMap, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred(), "the manager publishes no CA")
	roots := x509.NewCertPool()
	Expect(roots.AppendCertsFromPEM([]byte(cm.Data["ca.crt"]))).To(BeTrue())
	tools, err := testbed.ToolsDir("")
	Expect(err).NotTo(HaveOccurred())
	local, err := testbed.FreePort()
	Expect(err).NotTo(HaveOccurred())
	forward, err := testbed.StartProcess("port-forward", filepath.Join(tools, "kubectl"), []string{"--kubeconfig", bed.KubeconfigPath,
		"--context", testbed.PrimaryName, "-n", flotillav1.SystemNamespace, "port-forward", "pod/" + pod, fmt.Sprintf("%d:8443", local)},
		filepath.Join(GinkgoT().TempDir(), "port-forward.log"))
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = forward.Stop(5 * time.Second) }()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, ServerName: names.MetricsService + "." + flotillav1.SystemNamespace + ".svc", MinVersion: tls.VersionTLS12}}}
	token := scraperToken(ctx)
	var body string
	Eventually(func(g Gomega) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", local), nil)
		g.Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), string(raw))
		body = string(raw)
	}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
	return body
}
