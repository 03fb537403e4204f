package election_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/integration/clusterenv"
	"github.com/flotilla-dev/flotilla/test/promrules"
)

// scrape reads the manager's /metrics.
func scrape(ctx SpecContext) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = &httpError{resp.StatusCode}
	}
	return string(body), err
}

type httpError struct{ code int }

func (e *httpError) Error() string { return "status " + strconv.Itoa(e.code) }

// sample is the value of one series of a scrape (-1 when absent).
func sample(scrape, series string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(scrape)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return -1
	}
	return v
}

var _ = Describe("the manager's metrics", func() {
	It("serves every metric the chart's dashboard and alerts query, once an elected pod ran, a delegate was refused and a Replicator applied", func(ctx SpecContext) {
		// An elected pod that runs.
		pod := electedPod("metrics-web", nil, "10m")
		Expect(primary.Client.Create(ctx, pod)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(primary.Client.Delete(ctx, pod))).To(Succeed()) })
		var d *corev1.Pod
		Eventually(func() (err error) { d, err = delegate(ctx, "metrics-web"); return err }).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		d.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.9.0.8", StartTime: &metav1.Time{Time: time.Now()},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		Expect(secondary.Client.Status().Update(ctx, d)).To(Succeed())

		// An elected pod whose delegate's name another pod holds in the secondary: refused there.
		taken := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "metrics-taken"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		Expect(secondary.Client.Create(ctx, taken)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(secondary.Client.Delete(ctx, taken))).To(Succeed())
		})
		conflicted := electedPod("metrics-taken", nil, "10m")
		Expect(primary.Client.Create(ctx, conflicted)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(primary.Client.Delete(ctx, conflicted))).To(Succeed())
		})

		// A Replicator applied to the primary and the secondary.
		raw, err := os.ReadFile(filepath.Join(clusterenv.RepoRoot(), "config", "samples", "plumber-replicator.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var rep flotillav1.Replicator
		Expect(yaml.Unmarshal(raw, &rep)).To(Succeed())
		rep.Name, rep.Spec.ReplicationNamespace, rep.Spec.TargetCluster = "metrics", "metrics-replicated", []string{secondary.Name}
		Expect(primary.Client.Create(ctx, &rep)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(primary.Client.Delete(ctx, &rep))).To(Succeed()) })

		// A FleetQuota, in a namespace of its own (its pods would wait for it).
		Expect(primary.Namespace(ctx, "metrics-quota", nil)).To(Succeed())
		quota := &flotillav1.FleetQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "metrics-quota", Name: "team"},
			Spec: flotillav1.FleetQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}}
		Expect(primary.Client.Create(ctx, quota)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(primary.Client.Delete(ctx, quota))).To(Succeed()) })

		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(primary.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(primary.Client.Get(ctx, client.ObjectKeyFromObject(conflicted), &p)).To(Succeed())
			g.Expect(p.Status.Reason).To(Equal(flotillav1.ReasonNameConflict))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		dashboard := filepath.Join(clusterenv.RepoRoot(), "charts", "flotilla", "dashboards", "flotilla.json")
		rules := filepath.Join(clusterenv.RepoRoot(), "charts", "flotilla", "files", "prometheus-rules.yaml")
		queries, err := promrules.Names(ctx, []string{dashboard}, []string{rules})
		Expect(err).NotTo(HaveOccurred())
		east := `member_cluster="` + secondary.Name + `"`
		var text string
		Eventually(func(g Gomega) {
			var err error
			text, err = scrape(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			served := promrules.Served(text)
			for _, q := range queries {
				for _, m := range q.Metrics {
					if fromElsewhere(m) {
						continue // Prometheus's up, the API server's and controller-runtime's leader metrics
					}
					g.Expect(served).To(HaveKey(m), "%s: %s", q.Source, q.Expr)
				}
			}
			// The API server's view of the webhook, which the alerts read: served once it was called.
			cs, err := kubernetes.NewForConfig(primary.Config)
			g.Expect(err).NotTo(HaveOccurred())
			apiserver, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(apiserver)).To(ContainSubstring(`apiserver_admission_webhook_admission_duration_seconds_bucket{name="pods.flotilla.dev"`))
			g.Expect(sample(text, `flotilla_elected_pod_start_seconds_count{`+east+`}`)).To(BeNumerically(">=", 1))
			for _, leg := range []string{"admission_to_delegate_created", "delegate_created_to_running", "delegate_running_to_proxy_running"} {
				g.Expect(sample(text, `flotilla_elected_pod_start_leg_seconds_count{leg="`+leg+`",`+east+`}`)).To(BeNumerically(">=", 1), leg)
			}
			g.Expect(sample(text, `flotilla_proxies{`+east+`,phase="Running"}`)).To(BeNumerically(">=", 1))
			g.Expect(sample(text, `flotilla_delegate_creation_errors_total{`+east+`,reason="AlreadyExists"}`)).To(BeNumerically(">=", 1))
			g.Expect(sample(text, `flotilla_webhook_decisions_total{`+east+`,outcome="elected"}`)).To(BeNumerically(">=", 2))
			g.Expect(sample(text, `flotilla_replicator_synced{replicator="metrics"}`)).To(BeNumerically(">=", 0))
			g.Expect(sample(text, `flotilla_replicator_apply_duration_seconds_count{`+east+`}`)).To(BeNumerically(">=", 1))
			g.Expect(sample(text, `flotilla_cluster_ready{`+east+`,role="secondary"}`)).To(Equal(1.0))
			g.Expect(sample(text, `flotilla_fleetquota_hard{namespace="metrics-quota",quota="team",resource="pods"}`)).To(Equal(10.0))
			g.Expect(sample(text, `flotilla_fleetquota_used{namespace="metrics-quota",quota="team",resource="pods"}`)).To(Equal(0.0))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(strings.Count(text, "\nflotilla_")).To(BeNumerically(">", 10))
	}, SpecTimeout(2*time.Minute))
})

// fromElsewhere says whether the alerts read a metric from outside the manager (docs/
// observability.md): Prometheus's up, the API server's, the leader election's (this suite's
// manager does not elect a leader).
func fromElsewhere(name string) bool {
	return name == "up" || strings.HasPrefix(name, "apiserver_") || strings.HasPrefix(name, "leader_election_")
}
