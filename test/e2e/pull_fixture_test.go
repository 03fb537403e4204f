package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/internal/ociimage"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// pullTunnel is the suite manager's tunnel endpoint (--tunnel-bind-address), where the secondaries
// have real nodes: secondary2's agent reaches it at the host's end of that node's veth, the only
// address of this host its pods are routed to.
var pullTunnel struct {
	// address is HOST:PORT, the endpoint as the agents dial it and its certificate names it.
	address string
	// certDir holds tls.crt and tls.key (--tunnel-cert-dir); caFile the CA that signed them.
	certDir, caFile string
}

// pulledCluster is the secondary the pull-mode specs reach only through its agent.
func pulledCluster() *testbed.Cluster { return bed.Secondaries[len(bed.Secondaries)-1] }

// setUpTunnel picks the endpoint's address and issues its certificate, before the manager starts.
func setUpTunnel() {
	node := pulledCluster().RealNode
	port, err := testbed.FreePort()
	Expect(err).NotTo(HaveOccurred())
	pullTunnel.address = net.JoinHostPort(node.HostIP, strconv.Itoa(port))
	certs, err := testbed.WriteTunnelCerts(workDir, net.ParseIP(node.HostIP))
	Expect(err).NotTo(HaveOccurred())
	pullTunnel.certDir, pullTunnel.caFile = certs.Dir, certs.CAFile
}

// tunnelArgs are the manager's flags for the endpoint (none where the bed has no tunnel).
func tunnelArgs() []string {
	if pullTunnel.address == "" {
		return nil
	}
	// Agent credentials of 10 minutes, replaced every ~12 s (--token-renewal-fraction 0.02): the
	// pull-mode specs run with rotations happening.
	return []string{"--tunnel-bind-address", pullTunnel.address, "--tunnel-cert-dir", pullTunnel.certDir, "--agent-credential-lifetime", "10m"}
}

// importManagerImage makes the manager's image (the agent's) present on a secondary's real node.
func importManagerImage(ctx SpecContext, c *testbed.Cluster) {
	image := filepath.Join(workDir, "flotilla-manager.tar")
	if _, err := os.Stat(image); err != nil {
		Expect(ociimage.WriteTarball(ociimage.Spec{Ref: managerImageRepo + ":" + managerImageTag, Entrypoint: "/flotilla-manager",
			User: "65532:65532", Binaries: map[string]string{"linux/" + runtime.GOARCH: managerBin}}, "linux/"+runtime.GOARCH, image)).To(Succeed())
	}
	Expect(c.RealNode.ImportImage(ctx, image)).To(Succeed())
}

// agentValues are the chart values of a secondary's agent in the bed: the suite's image, present
// on the node, on the real node, whose taint it tolerates.
func agentValues(c *testbed.Cluster, enabled bool) []string {
	values := fmt.Sprintf(`manager:
  image: {repository: %s, tag: %s, pullPolicy: Never}
agent:
  enabled: %t
  cluster: %s
  tunnelAddress: %q
  nodeSelector: {%q: "true"}
  tolerations: [{key: %q, operator: Exists, effect: NoSchedule}]
`, managerImageRepo, managerImageTag, enabled, c.Name, pullTunnel.address, testbed.RealNodeKey, testbed.RealNodeKey)
	path := filepath.Join(workDir, "agent-values-"+c.Name+".yaml")
	Expect(os.WriteFile(path, []byte(values), 0o600)).To(Succeed())
	return []string{"-f", path}
}

// expectPulled checks that a secondary is Running, reached through a connected tunnel, its node Ready.
func expectPulled(ctx context.Context, g Gomega, name string) *flotillav1.ClusterDetector {
	cd, err := detector(ctx, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cd.Status.Mode).To(Equal(flotillav1.ModePull))
	g.Expect(cd.Status.Tunnel).NotTo(BeNil())
	g.Expect(cd.Status.Tunnel.Connected).To(BeTrue(), "tunnel of %s: %+v", name, cd.Status.Tunnel)
	g.Expect(cd.Status.ClusterStatus).To(Equal(flotillav1.ClusterRunning), "ClusterDetector %s: %s", name, cd.Status.Message)
	g.Expect(nodeReady(ctx, flotillav1.VirtualNodeName(name))).To(Equal(corev1.ConditionTrue), "node of %s", name)
	return cd
}

// agentToken is the token in a secondary's Secret flotilla-agent.
func agentToken(ctx context.Context, g Gomega, c *testbed.Cluster) string {
	s, err := c.Clientset.CoreV1().Secrets(flotillav1.SystemNamespace).Get(ctx, flotillav1.AgentSecretName, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return string(s.Data["token"])
}

// listRequests counts the LIST requests a cluster's API server has served since it started, by
// resource.
func listRequests(ctx context.Context, c *testbed.Cluster) map[string]int {
	raw, err := c.Clientset.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	resource := regexp.MustCompile(`[{,]resource="([^"]*)"`)
	n := map[string]int{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `verb="LIST"`) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		Expect(err).NotTo(HaveOccurred(), line)
		name := "?"
		if m := resource.FindStringSubmatch(line); m != nil {
			name = m[1]
		}
		n[name] += int(v)
	}
	return n
}

// residentBytes is a process's resident memory (VmRSS).
func residentBytes(pid int) int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	Expect(err).NotTo(HaveOccurred())
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			Expect(err).NotTo(HaveOccurred(), line)
			return kb << 10
		}
	}
	Fail("no VmRSS in /proc/" + strconv.Itoa(pid) + "/status")
	return 0
}
