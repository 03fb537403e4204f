package e2e

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// managerProcess is flotilla-manager running out of cluster against the bed's primary.
type managerProcess struct {
	*testbed.Process
	probeURL   string
	metricsURL string
}

// kubeletPortCount is how many kubelet ports the e2e manager is given: one per virtual node of
// the bed's secondaries, and room for those specs add.
const kubeletPortCount = 16

// startManager starts the manager on free ports. A port found free can be taken by another
// process before the manager binds it (the manager then exits at once): it is started again on
// other ports, a few times.
func startManager(bin, kubeconfig, logPath string, extraArgs ...string) (*managerProcess, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		m, err := startManagerOnce(bin, kubeconfig, logPath, extraArgs...)
		if err != nil {
			return nil, err
		}
		if m.startedWithin(3 * time.Second) {
			return m, nil
		}
		raw, _ := os.ReadFile(logPath)
		lastErr = fmt.Errorf("the manager exited at start (see %s)", logPath)
		if !strings.Contains(string(raw), "address already in use") {
			return nil, lastErr
		}
	}
	return nil, lastErr
}

// startedWithin says whether the manager is still running after d, or ready before then (every
// port it binds is bound once it is ready).
func (m *managerProcess) startedWithin(d time.Duration) bool {
	client := &http.Client{Timeout: 200 * time.Millisecond}
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if m.Exited() {
			return false
		}
		if code, err := httpStatus(client, m.probeURL+"/readyz"); err == nil && code == http.StatusOK {
			return true
		}
	}
	return !m.Exited()
}

func startManagerOnce(bin, kubeconfig, logPath string, extraArgs ...string) (*managerProcess, error) {
	probePort, err := testbed.FreePort()
	if err != nil {
		return nil, err
	}
	metricsPort, err := testbed.FreePort()
	if err != nil {
		return nil, err
	}
	webhookPort, err := testbed.FreePort()
	if err != nil {
		return nil, err
	}
	kubeletPort, err := testbed.FreePortRange(kubeletPortCount)
	if err != nil {
		return nil, err
	}
	// Not loopback: the API server's node proxy refuses a node at a loopback address.
	hostIP, err := testbed.HostIP()
	if err != nil {
		return nil, err
	}
	p, err := testbed.StartProcess("flotilla-manager", bin, append([]string{
		"--kubeconfig", kubeconfig,
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", probePort),
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", metricsPort),
		"--log-level", "debug",
		"--webhook-port", fmt.Sprint(webhookPort), "--webhook-bind-host", "127.0.0.1",
		"--webhook-url", fmt.Sprintf("https://127.0.0.1:%d", webhookPort),
		"--webhook-cert-dir", filepath.Join(filepath.Dir(logPath), "webhook-certs"),
		// The bed's API server presents this client certificate to webhooks: no one else is served.
		"--webhook-client-names", testbed.WebhookClientName,
		// Tokens of 10 minutes (join --token-duration 10m) are then renewed every ~12 s: the whole
		// suite runs with renewals happening, and a spec proves them.
		"--token-renewal-fraction", "0.02",
		"--failover-after", "5s",
		"--sweep-interval", "5s", "--dependency-grace", "2s", "--namespace-cleanup-interval", "3s",
		// A SIGKILLed leader's Lease is taken over after 10 s, not 15 s.
		"--leader-elect-lease-duration", "10s", "--leader-elect-renew-deadline", "8s", "--leader-elect-retry-period", "1s",
		// A resync every 30 s: the idle-writes spec watches whole resyncs.
		"--replicator-resync-interval", "30s", "--replicator-retry-interval", "3s",
		"--kubelet-port", fmt.Sprint(kubeletPort), "--kubelet-port-count", fmt.Sprint(kubeletPortCount),
		"--node-address", hostIP.String(),
		"--pod-network", string(managerPodNetwork()),
		"--inventory-namespaces", inventoryReaders,
	}, slices.Concat(tracingArgs(), tunnelArgs(), extraArgs)...), logPath,
		// Its packets are told from the test's own: the pull-mode specs drop those to secondary2.
		testbed.InIsolatedGroup())
	if err != nil {
		return nil, err
	}
	return &managerProcess{
		Process:    p,
		probeURL:   fmt.Sprintf("http://127.0.0.1:%d", probePort),
		metricsURL: fmt.Sprintf("https://127.0.0.1:%d/metrics", metricsPort),
	}, nil
}

func httpStatus(client *http.Client, url string) (int, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

var _ = Describe("flotilla-manager", func() {
	client := &http.Client{Timeout: 2 * time.Second}

	It("reports healthy and ready against the primary and holds the leader Lease", func(ctx SpecContext) {
		Eventually(func() (int, error) { return httpStatus(client, manager.probeURL+"/readyz") }).
			WithContext(ctx).Should(Equal(http.StatusOK), "manager log: %s", manager.LogPath)
		Expect(httpStatus(client, manager.probeURL+"/healthz")).To(Equal(http.StatusOK))
		Expect(manager.Exited()).To(BeFalse())

		Eventually(func(g Gomega) {
			lease, err := bed.Primary.Clientset.CoordinationV1().Leases("flotilla-system").
				Get(ctx, flotillav1.ManagerLeaseName, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
			g.Expect(*lease.Spec.HolderIdentity).NotTo(BeEmpty())
		}).WithContext(ctx).Should(Succeed())
	}, SpecTimeout(90*time.Second))

	It("refuses anonymous metrics scrapes", func(ctx SpecContext) {
		insecure := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed serving cert of the test's manager
		}}
		Eventually(func() (int, error) { return httpStatus(insecure, manager.metricsURL) }).
			WithContext(ctx).Should(BeElementOf(http.StatusUnauthorized, http.StatusForbidden))
	}, SpecTimeout(90*time.Second))
})
