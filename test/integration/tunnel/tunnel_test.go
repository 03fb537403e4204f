// Package tunnel_test is the integration suite of the tunnel a secondary's agent holds to the
// manager (pkg/tunnel): a real primary API server authenticates the agents (TokenReview of their
// ServiceAccounts' tokens), and the manager's client reaches a real secondary API server only
// through the agent, with TLS end to end.
package tunnel_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/cli"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/pki"
	"github.com/flotilla-dev/flotilla/pkg/tunnel"
	"github.com/flotilla-dev/flotilla/test/integration/clusterenv"
)

func TestTunnel(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "tunnel integration")
}

var (
	primary, secondary *clusterenv.Cluster
	server             *tunnel.Server
	endpoint           string
	endpointCA         *x509.CertPool
	endpointCAPEM      []byte
	endpointCert       tls.Certificate
	stopServer         context.CancelFunc
	serverDone         chan struct{}
)

// unroutable is where the manager's client believes the secondary is: TEST-NET-1, which nothing
// answers, so a request that succeeds went through the tunnel.
const unroutable = "192.0.2.1:6443"

var _ = BeforeSuite(func(ctx SpecContext) {
	var err error
	primary, err = clusterenv.Start("primary")
	Expect(err).NotTo(HaveOccurred())
	secondary, err = clusterenv.Start("secondary")
	Expect(err).NotTo(HaveOccurred())
	Expect(primary.Namespace(ctx, flotillav1.SystemNamespace, nil)).To(Succeed())
	for _, c := range []string{"secondary1", "secondary2", "stalled"} {
		Expect(primary.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
			Namespace: flotillav1.SystemNamespace, Name: tunnel.AgentServiceAccountPrefix + c}})).To(Succeed())
	}

	now := time.Now()
	ca, err := pki.NewCA("flotilla-tunnel", now, time.Hour)
	Expect(err).NotTo(HaveOccurred())
	kp, err := ca.IssueServer(nil, []net.IP{net.ParseIP("127.0.0.1")}, now, time.Hour)
	Expect(err).NotTo(HaveOccurred())
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	Expect(err).NotTo(HaveOccurred())
	endpointCert = cert
	endpointCA = x509.NewCertPool()
	endpointCA.AddCert(ca.Cert)
	endpointCAPEM = ca.CertPEM

	cs := kubernetes.NewForConfigOrDie(primary.Config)
	server = tunnel.NewServer(tunnel.Options{
		Authenticate: tunnel.TokenReviewer{Reviews: cs.AuthenticationV1().TokenReviews(), Namespace: flotillav1.SystemNamespace}.Authenticate,
		KeepAlive:    time.Second,
	}, GinkgoLogr)
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
	Expect(err).NotTo(HaveOccurred())
	endpoint = l.Addr().String()
	var sctx context.Context
	sctx, stopServer = context.WithCancel(context.Background()) //nolint:forbidigo // the endpoint outlives every spec
	serverDone = make(chan struct{})
	go func() {
		defer close(serverDone)
		_ = server.Serve(sctx, l)
	}()
}, NodeTimeout(3*time.Minute))

var _ = AfterSuite(func() {
	if stopServer != nil {
		stopServer()
		<-serverDone
	}
	for _, c := range []*clusterenv.Cluster{primary, secondary} {
		if c != nil {
			Expect(c.Stop()).To(Succeed())
		}
	}
})

// agentToken is a token of cluster's agent ServiceAccount in the primary, as the agent requests it.
func agentToken(ctx context.Context, cluster string) string {
	cs := kubernetes.NewForConfigOrDie(primary.Config)
	tr, err := cs.CoreV1().ServiceAccounts(flotillav1.SystemNamespace).CreateToken(ctx, tunnel.AgentServiceAccountPrefix+cluster,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// runAgent runs an agent claiming cluster with token, forwarding to the secondary's API server,
// until the spec ends.
func runAgent(ctx context.Context, cluster, token string) *tunnel.Agent {
	u, err := url.Parse(secondary.Config.Host)
	Expect(err).NotTo(HaveOccurred())
	return runAgentTo(ctx, endpoint, cluster, token, u.Host)
}

// runAgentTo runs an agent of the endpoint at address, forwarding to upstream, until the spec ends.
func runAgentTo(ctx context.Context, address, cluster, token, upstream string) *tunnel.Agent {
	a := tunnel.NewAgent(tunnel.AgentOptions{
		Cluster: cluster, Address: address, Upstream: upstream,
		TLS:        &tls.Config{RootCAs: endpointCA, MinVersion: tls.VersionTLS13},
		Token:      func(context.Context) (string, error) { return token, nil },
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond,
	}, logr.Discard())
	untilSpecEnds(ctx, func(ctx context.Context) { _ = a.Run(ctx) })
	return a
}

// serveAt runs a tunnel endpoint of its own on address (a free one for "127.0.0.1:0") until stop
// is called or the spec ends, and says where it listens.
func serveAt(ctx context.Context, address string) (s *tunnel.Server, at string, stop func()) {
	var l net.Listener
	// The port a stopped endpoint let go of is free again at once (SO_REUSEADDR); a moment is allowed.
	Eventually(func() (err error) {
		l, err = tls.Listen("tcp", address, &tls.Config{Certificates: []tls.Certificate{endpointCert}, MinVersion: tls.VersionTLS13})
		return err
	}).WithTimeout(5 * time.Second).Should(Succeed())
	cs := kubernetes.NewForConfigOrDie(primary.Config)
	s = tunnel.NewServer(tunnel.Options{
		Authenticate: tunnel.TokenReviewer{Reviews: cs.AuthenticationV1().TokenReviews(), Namespace: flotillav1.SystemNamespace}.Authenticate,
		KeepAlive:    time.Second,
	}, GinkgoLogr)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(sctx, l)
	}()
	stop = func() {
		cancel()
		<-done
	}
	DeferCleanup(stop)
	return s, l.Addr().String(), stop
}

// untilSpecEnds runs run on a goroutine of its own until the spec ends, then waits for it.
func untilSpecEnds(ctx context.Context, run func(context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	DeferCleanup(func() {
		cancel()
		<-done
	})
}

// startRegistry runs the manager's registry of the kubeconfig raw, with modes, dialling pulled
// clusters through the suite's endpoint, until the spec ends.
func startRegistry(ctx context.Context, modes map[string]string, raw []byte) *clusters.Registry {
	registry := clusters.NewRegistry(clusters.Options{PrimaryID: "the-primary", Tunnels: server, ProbeInterval: time.Second}, GinkgoLogr)
	registry.SetModes(modes)
	Expect(registry.Apply(raw)).To(Succeed())
	untilSpecEnds(ctx, func(ctx context.Context) { _ = registry.Start(ctx) })
	return registry
}

// throughTunnel is the manager's client of cluster: the secondary's own credentials and CA, its
// server verified by the name its certificate holds, at an address nothing answers, dialled through the
// cluster's tunnel.
func throughTunnel(cluster string) kubernetes.Interface {
	cfg := rest.CopyConfig(secondary.Config)
	u, err := url.Parse(cfg.Host)
	Expect(err).NotTo(HaveOccurred())
	// Verified as the name its certificate holds (envtest's: 127.0.0.1), whatever the address.
	cfg.ServerName = u.Hostname()
	cfg.Host = "https://" + unroutable
	cfg.Dial = server.Dialer(cluster)
	cfg.Timeout = 10 * time.Second
	return kubernetes.NewForConfigOrDie(cfg)
}

var _ = Describe("a secondary reached through its agent's tunnel", func() {
	It("serves the manager's requests and watches with TLS end to end, at an address the manager cannot dial", func(ctx SpecContext) {
		// The address is really unreachable from here: a direct dial does not answer.
		d := net.Dialer{Timeout: 500 * time.Millisecond}
		_, err := d.DialContext(ctx, "tcp", unroutable)
		Expect(err).To(HaveOccurred())

		runAgent(ctx, "secondary2", agentToken(ctx, "secondary2"))
		Eventually(func() bool { return server.Status("secondary2").Connected }).WithTimeout(20 * time.Second).Should(BeTrue())
		cs := throughTunnel("secondary2")
		ns, err := cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(ns.UID).NotTo(BeEmpty())

		w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		Expect(secondary.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "seen-through-the-tunnel"}})).To(Succeed())
		Eventually(w.ResultChan()).WithTimeout(10 * time.Second).Should(Receive(HaveField("Object", HaveField("ObjectMeta.Name", "seen-through-the-tunnel"))))
	}, SpecTimeout(time.Minute))

	It("makes a secondary registered in pull mode Running in the manager's registry, with its identity, reached only through its agent", func(ctx SpecContext) {
		// The registration's context, as join writes it: the secondary's CA and credentials, a
		// server address the manager cannot dial, and the name the server's certificate holds.
		u, err := url.Parse(secondary.Config.Host)
		Expect(err).NotTo(HaveOccurred())
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["edge"] = &clientcmdapi.Cluster{Server: "https://" + unroutable, TLSServerName: u.Hostname(), CertificateAuthorityData: secondary.Config.CAData}
		cfg.AuthInfos["edge"] = &clientcmdapi.AuthInfo{ClientCertificateData: secondary.Config.CertData, ClientKeyData: secondary.Config.KeyData}
		cfg.Contexts["edge"] = &clientcmdapi.Context{Cluster: "edge", AuthInfo: "edge"}
		raw, err := clientcmd.Write(*cfg)
		Expect(err).NotTo(HaveOccurred())

		Expect(primary.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
			Namespace: flotillav1.SystemNamespace, Name: tunnel.AgentServiceAccountPrefix + "edge"}})).To(Succeed())
		registry := startRegistry(ctx, map[string]string{"edge": clusters.ModePull}, raw)
		// No agent yet: the cluster does not answer.
		Consistently(func() flotillav1.ClusterStatus {
			s, _ := registry.Snapshot("edge")
			return s.Status
		}).WithTimeout(3 * time.Second).ShouldNot(Equal(flotillav1.ClusterRunning))

		runAgent(ctx, "edge", agentToken(ctx, "edge"))
		var ks corev1.Namespace
		Expect(secondary.Client.Get(ctx, client.ObjectKey{Name: "kube-system"}, &ks)).To(Succeed())
		Eventually(func(g Gomega) {
			s, _ := registry.Snapshot("edge")
			g.Expect(s.Status).To(Equal(flotillav1.ClusterRunning), "%s: %s", s.Reason, s.Message)
			g.Expect(s.ID).To(Equal(string(ks.UID)))
			g.Expect(s.Mode).To(Equal(clusters.ModePull))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	}, SpecTimeout(time.Minute))

	It("joins a secondary with flotillactl cluster join --pull: its agent's credential and the endpoint's CA in the secondary, the cluster pulled in the registration, and Running through the agent", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		raw, err := clusterenv.Kubeconfig(primary, secondary)
		Expect(err).NotTo(HaveOccurred())
		kubeconfig, caFile := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "ca.crt")
		Expect(os.WriteFile(kubeconfig, raw, 0o600)).To(Succeed())
		Expect(os.WriteFile(caFile, endpointCAPEM, 0o600)).To(Succeed())
		var out, errOut bytes.Buffer
		root := cli.NewRootCommand(&out, &errOut)
		root.SetArgs([]string{"--kubeconfig", kubeconfig, "--context", primary.Name, "cluster", "join", "--secondary-context", secondary.Name,
			"--name", "pulled", "--pull", "--tunnel-address", endpoint, "--tunnel-ca-file", caFile})
		Expect(root.ExecuteContext(ctx)).To(Succeed(), "%s%s", out.String(), errOut.String())
		Expect(out.String()).To(ContainSubstring("--set agent.enabled=true --set agent.cluster=pulled --set agent.tunnelAddress=" + endpoint))

		// What the agent is given, in the secondary.
		var agentSecret corev1.Secret
		Expect(secondary.Client.Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: cli.AgentSecretName}, &agentSecret)).To(Succeed())
		Expect(agentSecret.Data).To(HaveKeyWithValue("ca.crt", endpointCAPEM))
		Expect(agentSecret.Data).To(HaveKeyWithValue("token", Not(BeEmpty())))
		// What the manager reads, in the primary.
		var registration corev1.Secret
		Expect(primary.Client.Get(ctx, clusters.RegistrationKey(), &registration)).To(Succeed())
		Expect(clusters.Modes(&registration)).To(HaveKeyWithValue("pulled", clusters.ModePull))

		registry := startRegistry(ctx, clusters.Modes(&registration), registration.Data[flotillav1.KubeconfigSecretKey])
		runAgent(ctx, "pulled", string(agentSecret.Data["token"]))
		var ks corev1.Namespace
		Expect(secondary.Client.Get(ctx, client.ObjectKey{Name: "kube-system"}, &ks)).To(Succeed())
		Eventually(func(g Gomega) {
			s, _ := registry.Snapshot("pulled")
			g.Expect(s.Status).To(Equal(flotillav1.ClusterRunning), "%s: %s", s.Reason, s.Message)
			g.Expect(s.ID).To(Equal(string(ks.UID)))
			g.Expect(s.Tunnel).To(HaveField("Connected", BeTrue()))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("refuses an agent whose credential is another cluster's, naming the cluster it claimed, and one with none valid", func(ctx SpecContext) {
		a := runAgent(ctx, "secondary1", agentToken(ctx, "secondary2"))
		Eventually(func() string { return a.Status().LastError }).WithTimeout(20 * time.Second).Should(ContainSubstring("not authorized for this cluster"))
		Expect(server.Status("secondary1").LastError).To(ContainSubstring(`an agent of cluster "secondary2" claimed cluster "secondary1"`))
		Expect(server.Status("secondary1").Connected).To(BeFalse())
		_, err := throughTunnel("secondary1").CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
		Expect(errors.Is(err, tunnel.ErrNoTunnel)).To(BeTrue(), "%v", err)

		forged := runAgent(ctx, "secondary1", "not-a-token")
		Eventually(func() string { return forged.Status().LastError }).WithTimeout(20 * time.Second).Should(ContainSubstring("not authorized"))
		Expect(server.Status("secondary1").Connects).To(BeZero())
	}, SpecTimeout(time.Minute))

	It("brings an agent's session back to a new leader at the same address within the agent's backoff, and carries requests again", func(ctx SpecContext) {
		old, address, stopOld := serveAt(ctx, "127.0.0.1:0")
		u, err := url.Parse(secondary.Config.Host)
		Expect(err).NotTo(HaveOccurred())
		a := runAgentTo(ctx, address, "secondary2", agentToken(ctx, "secondary2"), u.Host)
		Eventually(func() bool { return old.Status("secondary2").Connected }).WithTimeout(20 * time.Second).Should(BeTrue())

		// The leader goes; another takes its place at the same address.
		stopOld()
		gone := time.Now()
		next, _, _ := serveAt(ctx, address)
		Eventually(func() bool { return next.Status("secondary2").Connected }).WithTimeout(10 * time.Second).Should(BeTrue())
		AddReportEntry("the old leader gone to the agent's session with the new one", time.Since(gone).Round(10*time.Millisecond).String())
		Expect(a.Status().Connects).To(BeNumerically(">=", 2))
		cfg := rest.CopyConfig(secondary.Config)
		cfg.ServerName, cfg.Host, cfg.Dial, cfg.Timeout = u.Hostname(), "https://"+unroutable, next.Dialer("secondary2"), 10*time.Second
		_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
	}, SpecTimeout(time.Minute))

	It("never lets a cluster whose tunnel stalls slow another's: 20 requests hung in one, the other's answered as fast as before", func(ctx SpecContext) {
		// The stalled cluster's agent forwards to a server that accepts and never answers.
		hole, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		var mu sync.Mutex
		var held []net.Conn
		accepted := make(chan struct{})
		go func() {
			defer close(accepted)
			for {
				c, err := hole.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		}()
		DeferCleanup(func() {
			_ = hole.Close()
			<-accepted
			mu.Lock()
			defer mu.Unlock()
			for _, c := range held {
				_ = c.Close()
			}
		})
		runAgentTo(ctx, endpoint, "stalled", agentToken(ctx, "stalled"), hole.Addr().String())
		runAgent(ctx, "secondary2", agentToken(ctx, "secondary2"))
		Eventually(func() bool { return server.Status("stalled").Connected && server.Status("secondary2").Connected }).
			WithTimeout(20 * time.Second).Should(BeTrue())

		healthy := throughTunnel("secondary2")
		slowest := func() time.Duration {
			var worst time.Duration
			for range 20 {
				began := time.Now()
				_, err := healthy.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
				Expect(err).NotTo(HaveOccurred())
				worst = max(worst, time.Since(began))
			}
			return worst
		}
		before := slowest()
		hung := throughTunnel("stalled")
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				_, _ = hung.CoreV1().Namespaces().Get(rctx, "kube-system", metav1.GetOptions{})
			})
		}
		time.Sleep(500 * time.Millisecond) // the 20 hung
		during := slowest()
		wg.Wait()
		AddReportEntry("slowest of 20 requests to the healthy cluster, before and while 20 hang in the stalled one", fmt.Sprintf("%s, %s", before, during))
		Expect(during).To(BeNumerically("<", max(10*before, 500*time.Millisecond)))
	}, SpecTimeout(time.Minute))

	It("holds its memory and goroutines flat over 10,000 unauthenticated connection attempts", func(ctx SpecContext) {
		host, port, err := net.SplitHostPort(endpoint)
		Expect(err).NotTo(HaveOccurred())
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		goroutines := runtime.NumGoroutine()
		for i := range 10000 {
			c, err := net.Dial("tcp", net.JoinHostPort(host, port))
			Expect(err).NotTo(HaveOccurred())
			if i%2 == 0 {
				_, _ = c.Write([]byte(strings.Repeat("x", 64)))
			}
			_ = c.Close()
		}
		Eventually(runtime.NumGoroutine).WithTimeout(30 * time.Second).Should(BeNumerically("<=", goroutines+10))
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		AddReportEntry("heap before and after 10,000 attempts", fmt.Sprintf("%d, %d bytes", before.HeapAlloc, after.HeapAlloc))
		Expect(after.HeapAlloc).To(BeNumerically("<", before.HeapAlloc+8<<20), "heap grew from %d to %d", before.HeapAlloc, after.HeapAlloc)
	}, SpecTimeout(2*time.Minute))
})
