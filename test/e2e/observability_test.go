package e2e

import (
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
		if a.Name == "FlotillaClusterUnreachable" && a.Labels["cluster"] == cluster {
			out = append(out, a)
		}
	}
	return out
}

// metricsScraper returns what scrapes the manager's /metrics as a scraper would (a ServiceAccount
// bound to the chart's ClusterRole flotilla-metrics-reader, its token as bearer) until a line of it
// is want, and writes that scrape to a file of dir.
func metricsScraper(ctx SpecContext, dir string) func(name, want string) string {
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
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the manager's self-signed serving certificate
	}}
	return func(name, want string) string {
		var body string
		Eventually(func(g Gomega) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, manager.metricsURL, nil)
			g.Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Authorization", "Bearer "+tr.Status.Token)
			resp, err := hc.Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(resp.StatusCode).To(Equal(http.StatusOK), string(raw))
			body = string(raw)
			g.Expect(body).To(MatchRegexp(`(?m)^` + regexp.QuoteMeta(want) + `$`))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		file := filepath.Join(dir, name)
		Expect(os.WriteFile(file, []byte(body), 0o600)).To(Succeed())
		return file
	}
}
