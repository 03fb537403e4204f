package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/promrules"
)

// The chart's alerts are judged on what the real manager serves: each scrape is replayed, as
// constant series, past the alert's `for:` through Prometheus's rule manager (test/tools/promrules).
// FlotillaClusterUnreachable is asserted in the suite's one outage of a secondary (outage_test.go).

// renderAlertRules writes the chart's PrometheusRule, as the chart renders it, to a file of dir.
func renderAlertRules(ctx SpecContext, dir string) string {
	out, err := helm(ctx, bed.Primary, "template", "flotilla", "charts/flotilla", "-n", "flotilla-system", "--kube-version", "1.34.0", "--show-only", "templates/metrics.yaml",
		"--api-versions", "monitoring.coreos.com/v1", "--set", "metrics.prometheusRule.enabled=true")
	Expect(err).NotTo(HaveOccurred(), out)
	rules := filepath.Join(dir, "rendered.yaml")
	Expect(os.WriteFile(rules, []byte(out), 0o600)).To(Succeed())
	return rules
}

// unreachableAlerts evaluates the rules over a scrape held constant for after, and returns the
// FlotillaClusterUnreachable alerts of cluster.
func unreachableAlerts(ctx SpecContext, rules, scrape, cluster string, after time.Duration) []promrules.Alert {
	alerts, err := promrules.EvalScrape(ctx, rules, scrape, after)
	Expect(err).NotTo(HaveOccurred())
	var out []promrules.Alert
	for _, a := range alerts {
		if a.Name == "FlotillaClusterUnreachable" && a.Labels["member_cluster"] == cluster {
			out = append(out, a)
		}
	}
	return out
}

// scraperToken is the token of a ServiceAccount bound to the chart's ClusterRole
// flotilla-metrics-reader: what a Prometheus scraping the manager holds.
func scraperToken(ctx SpecContext) string {
	const ns, sa = "flotilla-system", "e2e-metrics-scraper"
	_, err := bed.Primary.Clientset.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	_, err = bed.Primary.Clientset.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "flotilla-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	tr, err := bed.Primary.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// scrapeManager scrapes the manager's /metrics once, as a scraper holding token would: verifying
// the manager's certificate against the CA it publishes (the ConfigMap flotilla-ca, what the
// chart's ServiceMonitor names), never skipping verification.
func scrapeManager(ctx context.Context, token string) (string, error) {
	names := flotillav1.NamesFrom("")
	cm, err := bed.Primary.Clientset.CoreV1().ConfigMaps(flotillav1.SystemNamespace).Get(ctx, names.CAConfigMap, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading the CA the manager publishes: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(cm.Data["ca.crt"])) {
		return "", fmt.Errorf("ConfigMap %s holds no certificate under ca.crt", names.CAConfigMap)
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, manager.metricsURL, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("scraping %s: %s: %s", manager.metricsURL, resp.Status, raw)
	}
	return string(raw), nil
}

// metricsScraper returns what scrapes the manager's /metrics as a scraper would (a ServiceAccount
// bound to the chart's ClusterRole flotilla-metrics-reader, its token as bearer) until a line of it
// is want, and writes that scrape to a file of dir.
func metricsScraper(ctx SpecContext, dir string) func(name, want string) string {
	token := scraperToken(ctx)
	return func(name, want string) string {
		var body string
		Eventually(func(g Gomega) {
			var err error
			body, err = scrapeManager(ctx, token)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(body).To(MatchRegexp(`(?m)^` + regexp.QuoteMeta(want) + `$`))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		file := filepath.Join(dir, name)
		Expect(os.WriteFile(file, []byte(body), 0o600)).To(Succeed())
		return file
	}
}

// outsideScrape writes, as one target's scrape, what Prometheus would hold of Flotilla at this
// moment: up for the manager's target (1 when a scrape of it answers), that scrape's series, and
// the primary's API server's view of the webhooks (its apiserver_admission_webhook_* families).
func outsideScrape(ctx SpecContext, token, file string) (up bool, text string) {
	var b strings.Builder
	b.WriteString(apiserverWebhookFamilies(ctx))
	managerText, err := scrapeManager(ctx, token)
	up = err == nil
	if up {
		b.WriteString(managerText)
	}
	fmt.Fprintf(&b, "# TYPE up gauge\nup{job=%q,instance=%q} %d\n", "flotilla-manager-metrics", "manager", map[bool]int{true: 1}[up])
	Expect(os.WriteFile(file, []byte(b.String()), 0o600)).To(Succeed())
	return up, b.String()
}

// apiserverWebhookFamilies is the primary's API server's view of the webhooks it calls: its
// apiserver_admission_webhook_* families, from its /metrics.
func apiserverWebhookFamilies(ctx context.Context) string {
	raw, err := bed.Primary.Clientset.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	var b strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		family := strings.TrimPrefix(strings.TrimPrefix(line, "# HELP "), "# TYPE ")
		if strings.HasPrefix(family, "apiserver_admission_webhook_") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// firingOf names the alerts of names that fire.
func firingOf(alerts []promrules.Alert, names ...string) []string {
	var out []string
	for _, a := range alerts {
		if a.Firing() && slices.Contains(names, a.Name) && !slices.Contains(out, a.Name) {
			out = append(out, a.Name)
		}
	}
	return out
}

var _ = Describe("alerts that see the manager from outside", Ordered, Serial, Label("disruptive"), func() {
	It("fire FlotillaManagerDown and FlotillaWebhookUnreachable within their for: windows while the manager is stopped, from the API server's and Prometheus's view, and resolve once it is back", func(ctx SpecContext) {
		const ns = "outside-alerts"
		joinBothSecondaries(ctx)
		enabledNamespace(ctx, ns)
		dir := GinkgoT().TempDir()
		rules := renderAlertRules(ctx, dir)
		token := scraperToken(ctx)
		outside := []string{"FlotillaManagerDown", "FlotillaNoLeader", "FlotillaWebhookUnreachable", "FlotillaWebhookSlow"}
		elected := func(name string) error {
			_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name,
				Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}, metav1.CreateOptions{})
			return err
		}
		Expect(elected("before")).To(Succeed())

		By("healthy: the manager answers and leads; none of the alerts fires")
		healthy := filepath.Join(dir, "healthy.prom")
		Eventually(func(g Gomega) {
			up, text := outsideScrape(ctx, token, healthy)
			g.Expect(up).To(BeTrue())
			g.Expect(text).To(MatchRegexp(`(?m)^leader_election_master_status\{name="flotilla-manager.flotilla.dev"\} 1$`))
			g.Expect(text).To(ContainSubstring(`apiserver_admission_webhook_admission_duration_seconds_bucket{name="pods.flotilla.dev"`))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		alerts, err := promrules.EvalScrapes(ctx, rules, []string{healthy}, 0, 10*time.Minute)
		Expect(err).NotTo(HaveOccurred())
		Expect(firingOf(alerts, outside...)).To(BeEmpty())

		By("the manager stops: elected pods are refused at the webhook")
		Expect(manager.Stop(20 * time.Second)).To(Succeed())
		restarted := false
		DeferCleanup(func(ctx SpecContext) {
			if !restarted {
				var err error
				manager, err = startManager(managerBin, managerKubeconfig, filepath.Join(workDir, "manager.log"))
				Expect(err).NotTo(HaveOccurred())
			}
		})
		// A scrape every 2 minutes, as the manager stays down and pods keep being refused between
		// them: healthy, then three down.
		scrapes := []string{healthy}
		for i := range 3 {
			err := elected(fmt.Sprintf("refused-%d", i))
			Expect(err).To(MatchError(ContainSubstring(`failed calling webhook "pods.flotilla.dev"`)))
			down := filepath.Join(dir, fmt.Sprintf("down-%d.prom", i))
			up, _ := outsideScrape(ctx, token, down)
			Expect(up).To(BeFalse())
			scrapes = append(scrapes, down)
		}
		// Refused from 2 minutes on. The API server's counter of those refusals may be new at the
		// first down scrape (no refusal before it in this bed), and rate() sees no rise in a
		// series' first sample, as Prometheus does not: the rise comes with the second, at 4. So
		// the webhook alert (for: 1m) fires by 5.5, when the manager's (for: 5m) is still pending;
		// by 8 both fire.
		alerts, err = promrules.EvalScrapes(ctx, rules, scrapes, 2*time.Minute, 5*time.Minute+30*time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(firingOf(alerts, outside...)).To(ConsistOf("FlotillaWebhookUnreachable"), "3.5 minutes down")
		alerts, err = promrules.EvalScrapes(ctx, rules, scrapes, 2*time.Minute, 8*time.Minute)
		Expect(err).NotTo(HaveOccurred())
		Expect(firingOf(alerts, outside...)).To(ConsistOf("FlotillaManagerDown", "FlotillaWebhookUnreachable"), "6 minutes down")

		By("back: the manager answers, leads and admits; both alerts resolve")
		manager, err = startManager(managerBin, managerKubeconfig, filepath.Join(workDir, "manager.log"))
		Expect(err).NotTo(HaveOccurred())
		restarted = true
		back := filepath.Join(dir, "back.prom")
		Eventually(func(g Gomega) {
			g.Expect(elected("after")).To(Succeed())
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			up, text := outsideScrape(ctx, token, back)
			g.Expect(up).To(BeTrue())
			g.Expect(text).To(MatchRegexp(`(?m)^leader_election_master_status\{name="flotilla-manager.flotilla.dev"\} 1$`))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		alerts, err = promrules.EvalScrapes(ctx, rules, append(scrapes, back), 2*time.Minute, 16*time.Minute)
		Expect(err).NotTo(HaveOccurred())
		Expect(firingOf(alerts, outside...)).To(BeEmpty(), "8 minutes after the manager came back")
	}, SpecTimeout(3*time.Minute))
})
