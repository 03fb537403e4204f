// Package election_test is the integration suite of pod election on one primary and one
// secondary (real API servers, no kubelets): the webhook's admission end to end, the proxy
// reconciler, the dependency reconciler and the sweep, wired as the manager wires them.
package election_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/controllers/dependency"
	"github.com/flotilla-dev/flotilla/pkg/controllers/proxy"
	"github.com/flotilla-dev/flotilla/pkg/controllers/registration"
	"github.com/flotilla-dev/flotilla/pkg/copies"
	"github.com/flotilla-dev/flotilla/pkg/seal"
	"github.com/flotilla-dev/flotilla/test/integration/clusterenv"
	"github.com/flotilla-dev/flotilla/test/testbed"
	"github.com/flotilla-dev/flotilla/webhook"
)

const (
	// ns is the enabled namespace of the specs, in both clusters.
	ns = "election"
	// grace is the dependency grace period: short, so release is seen within a spec.
	grace = 2 * time.Second
)

var (
	primary, secondary *clusterenv.Cluster
	stopManager        func() error
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
	// The proxies' virtual node (no virtual-kubelet here: its presence is what the reconciler reads).
	Expect(primary.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: flotillav1.VirtualNodeName(secondary.Name),
		Labels: map[string]string{flotillav1.LabelCluster: secondary.Name, flotillav1.LabelNodeType: flotillav1.NodeTypeVirtualKubelet}}})).To(Succeed())
	Expect(secondary.ReadyNode(ctx, "east-1", "8", "16Gi")).To(Succeed())

	var primaryID string
	Eventually(func() error { primaryID, err = clusters.ClusterID(ctx, primary.Client); return err }).WithContext(ctx).Should(Succeed())
	Expect(secondary.Namespace(ctx, ns, map[string]string{flotillav1.LabelManagedBy: primaryID})).To(Succeed())
	raw, err := clusterenv.Kubeconfig(secondary)
	Expect(err).NotTo(HaveOccurred())
	Expect(primary.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace,
		Name: flotillav1.KubeconfigSecretName}, Data: map[string][]byte{flotillav1.KubeconfigSecretKey: raw}})).To(Succeed())

	startManager(ctx, primaryID)
	Eventually(func(g Gomega) {
		var node corev1.Node
		g.Expect(secondary.Client.Get(ctx, client.ObjectKey{Name: "east-1"}, &node)).To(Succeed())
		var fp flotillav1.FlotillaPrimary
		g.Expect(secondary.Client.Get(ctx, client.ObjectKey{Name: primaryID}, &fp)).To(Succeed(), "the registry ensures the FlotillaPrimary")
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	// Ready once the webhook serves and knows the secondary's capacity: an elected pod is admitted.
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

// startManager wires what election needs as cmd/flotilla-manager does: registry, registration,
// webhook (URL mode, its own CA and configuration), proxy and dependency reconcilers, sweep.
func startManager(ctx context.Context, primaryID string) {
	port, err := testbed.FreePort()
	Expect(err).NotTo(HaveOccurred())
	certDir := GinkgoT().TempDir()
	// The manager's calls to the primary are counted by path (a spec bounds a Pending proxy's).
	cfg := rest.CopyConfig(primary.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			primaryCalls.add(req.Method + " " + req.URL.Path)
			return rt.RoundTrip(req)
		})
	})
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 clusterenv.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          ctrlwebhook.NewServer(ctrlwebhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir}),
	})
	Expect(err).NotTo(HaveOccurred())
	registry := clusters.NewRegistry(clusters.Options{PrimaryID: primaryID, ProbeInterval: 500 * time.Millisecond},
		ctrl.Log.WithName("clusters"))
	Expect(mgr.Add(registry)).To(Succeed())
	recorder := mgr.GetEventRecorder("flotilla")
	Expect((&registration.Reconciler{Client: mgr.GetClient(), Registry: registry, Recorder: recorder}).SetupWithManager(mgr)).To(Succeed())

	certs := &webhook.Certificates{Client: mgr.GetClient(), CertDir: certDir, SecretName: flotillav1.WebhookCASecretName,
		IPs:    []net.IP{net.ParseIP("127.0.0.1")},
		Config: webhook.ConfigOptions{URL: fmt.Sprintf("https://127.0.0.1:%d", port)}}
	// The manager's client reads from a cache that is not started yet: a direct client does the first Ensure.
	direct, err := client.New(primary.Config, client.Options{Scheme: clusterenv.Scheme})
	Expect(err).NotTo(HaveOccurred())
	first := *certs
	first.Client = direct
	Expect(first.Ensure(ctx)).To(Succeed())
	// As the manager does: every replica reads (or the first makes) the admission seal's key.
	sealKey, err := seal.Ensure(ctx, direct, flotillav1.SealSecretName)
	Expect(err).NotTo(HaveOccurred())
	podHandler := &webhook.Handler{
		Registry: registry, Options: webhook.Options{Choose: webhook.WeightedRandom}, Decoder: admission.NewDecoder(mgr.GetScheme()),
		Namespaces: mgr.GetClient(), LiveNamespaces: mgr.GetAPIReader(), SealKey: sealKey}
	mgr.GetWebhookServer().Register(webhook.Path, &admission.Webhook{Handler: podHandler})

	meta, err := metadata.NewForConfig(primary.Config)
	Expect(err).NotTo(HaveOccurred())
	dependencies := dependency.NewMetadataWatch(meta)
	Expect((&dependency.Reconciler{Cache: mgr.GetClient(), Primary: mgr.GetAPIReader(), Secondaries: registry,
		Grace: grace}).SetupWithManager(mgr, dependencies)).To(Succeed())
	Expect((&proxy.Reconciler{Client: mgr.GetClient(), Secondaries: registry, Recorder: recorder, SealKey: sealKey, Refit: podHandler.Refit,
		Reflector:    &copies.Reflector{Primary: mgr.GetAPIReader(), PrimaryID: primaryID},
		Dependencies: dependencies.WaitingProxies(mgr.GetClient())}).SetupWithManager(ctx, mgr, 4)).To(Succeed())
	Expect(mgr.Add(&proxy.Sweeper{Proxies: mgr.GetClient(), Registry: registry, Interval: 2 * time.Second,
		Log: ctrl.Log.WithName("sweep")})).To(Succeed())

	stopManager = clusterenv.Run(mgr)
}
