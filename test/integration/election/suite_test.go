// Package election_test is the integration suite of pod election on one primary and one
// secondary (real API servers, no kubelets): the webhook's admission end to end, the proxy
// reconciler, the dependency reconciler and the sweep, in the manager pkg/setup builds for
// cmd/flotilla-manager.
package election_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/setup"
	"github.com/flotilla-dev/flotilla/test/integration/clusterenv"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

const (
	// ns is the enabled namespace of the specs, in both clusters.
	ns = "election"
	// grace is the dependency grace period: short, so release is seen within a spec.
	grace = 2 * time.Second
	// quietStart is the manager's quiet start: long enough for the specs' delegates, made Running
	// by the specs themselves, to start within it on a busy machine.
	quietStart = 8 * time.Second
)

var (
	primary, secondary *clusterenv.Cluster
	stopManager        func() error
	// metricsURL is the manager's /metrics (plain HTTP on the loopback address).
	metricsURL string
)

func TestElection(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "election integration")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	primary, err = clusterenv.Start("primary")
	Expect(err).NotTo(HaveOccurred())
	secondary, err = clusterenv.Start("east")
	Expect(err).NotTo(HaveOccurred())

	Expect(primary.Namespace(ctx, flotillav1.SystemNamespace, nil)).To(Succeed())
	Expect(primary.Namespace(ctx, ns, map[string]string{flotillav1.LabelEnabled: "true"})).To(Succeed())
	Expect(secondary.ReadyNode(ctx, "east-1", "8", "16Gi")).To(Succeed())

	var primaryID string
	Eventually(func() error { primaryID, err = clusters.ClusterID(ctx, primary.Client); return err }).WithContext(ctx).Should(Succeed())
	Expect(secondary.Namespace(ctx, ns, map[string]string{flotillav1.LabelManagedBy: primaryID})).To(Succeed())
	raw, err := clusterenv.Kubeconfig(secondary)
	Expect(err).NotTo(HaveOccurred())
	Expect(primary.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace,
		Name: flotillav1.KubeconfigSecretName}, Data: map[string][]byte{flotillav1.KubeconfigSecretKey: raw}})).To(Succeed())

	mgr := startManager(ctx)
	// Ready as /readyz says: the registration read, the secondary probed and its capacity synced.
	Eventually(mgr.Registry.Ready).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	Eventually(func(g Gomega) {
		var node corev1.Node
		g.Expect(secondary.Client.Get(ctx, client.ObjectKey{Name: "east-1"}, &node)).To(Succeed())
		var fp flotillav1.FlotillaPrimary
		g.Expect(secondary.Client.Get(ctx, client.ObjectKey{Name: primaryID}, &fp)).To(Succeed(), "the registry ensures the FlotillaPrimary")
		g.Expect(primary.LiftNotReadyTaint(ctx, flotillav1.VirtualNodeName(secondary.Name))).To(Succeed(),
			"the manager makes the secondary's virtual node, Ready")
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	// The webhook serves: an elected pod is admitted.
	Eventually(func() error {
		return primary.Client.Create(ctx, electedPod("probe", nil, "10m"), client.DryRunAll)
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
}, NodeTimeout(2*time.Minute))

var _ = AfterSuite(func() {
	if stopManager != nil {
		Expect(stopManager()).To(Succeed())
	}
	Expect(secondary.Stop()).To(Succeed())
	Expect(primary.Stop()).To(Succeed())
})

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// callCounter counts requests by "METHOD path".
type callCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *callCounter) add(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
}

func (c *callCounter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

// primaryCalls counts what the manager asks of the primary.
var primaryCalls callCounter

// startManager runs the manager as cmd/flotilla-manager builds it (pkg/setup), with the webhook
// out of cluster (URL mode, its own CA and configuration), fast probes and sweeps, and a short
// dependency grace.
func startManager(ctx context.Context) *setup.Manager {
	port, err := testbed.FreePort()
	Expect(err).NotTo(HaveOccurred())
	metricsPort, err := testbed.FreePort()
	Expect(err).NotTo(HaveOccurred())
	// The manager's calls to the primary are counted by path (a spec bounds a Pending proxy's).
	cfg := rest.CopyConfig(primary.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			primaryCalls.add(req.Method + " " + req.URL.Path)
			return rt.RoundTrip(req)
		})
	})
	opts := setup.DefaultOptions()
	// Metrics served as the manager serves them, without TLS and authentication (a spec scrapes them).
	opts.Manager.MetricsBindAddress, opts.Manager.HealthProbeBindAddress = fmt.Sprintf("127.0.0.1:%d", metricsPort), "0"
	opts.Manager.MetricsSecure = false
	metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	opts.LeaderElection.Enabled = false
	opts.Clusters.ProbeInterval = 500 * time.Millisecond
	opts.VirtualNodes.KubeletPort = 0
	opts.Webhook.BindHost, opts.Webhook.Port, opts.Webhook.CertDir = "127.0.0.1", port, GinkgoT().TempDir()
	opts.Webhook.URL = fmt.Sprintf("https://127.0.0.1:%d", port)
	// One secondary: every worker may work on it.
	opts.Election.ProxyWorkers, opts.Election.ProxyWorkersPerCluster = 4, 4
	opts.Election.DependencyGrace = grace
	opts.Election.SweepInterval = 2 * time.Second
	// A quiet start of its own, shorter than the default: a spec sees the setting reach the proxy
	// reconciler (its Pending proxy written at this, not at the default).
	opts.Election.QuietStart = quietStart
	mgr, err := setup.New(ctx, cfg, opts, ctrl.Log)
	Expect(err).NotTo(HaveOccurred())
	stopManager = clusterenv.Run(mgr)
	return mgr
}
