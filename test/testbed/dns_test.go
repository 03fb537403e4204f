package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
)

func TestCorefileServesTheClusterAndTheClusterSet(t *testing.T) {
	raw, err := renderCorefile(corednsConfig{Addr: "172.31.250.1", Kubeconfig: "/w/coredns/kubeconfig", Port: 20053, ReadyPort: 20181,
		CacheTTL: 5, ClusterDomain: ClusterDomain, ClusterSetDomain: ClusterSetDomain})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{".:20053 {", "bind 172.31.250.1", "ready 127.0.0.1:20181", "cache 5",
		"kubernetes cluster.local clusterset.local in-addr.arpa ip6.arpa {", "kubeconfig /w/coredns/kubeconfig",
		"pods insecure", "multicluster clusterset.local", "fallthrough in-addr.arpa ip6.arpa"} {
		if !strings.Contains(string(raw), w) {
			t.Errorf("Corefile lacks %q:\n%s", w, raw)
		}
	}
	if strings.Contains(string(raw), "forward") {
		t.Errorf("the Corefile forwards, which an offline host cannot:\n%s", raw)
	}
}

func TestClusterDNSIsTheTenthServiceAddressInTheKubeletConfig(t *testing.T) {
	for cidr, want := range map[string]string{"10.0.0.0/24": "10.0.0.10", "172.30.96.0/24": "172.30.96.10"} {
		if got, err := dnsServiceIP(cidr); err != nil || got != want {
			t.Errorf("dnsServiceIP(%s) = %q, %v; want %s", cidr, got, err, want)
		}
	}
	if _, err := dnsServiceIP("fd00::/108"); err == nil {
		t.Error("dnsServiceIP of an IPv6 range: want an error")
	}
	n := &SecondaryRealNode{Name: "secondary1-real", Dir: "/w/realnode-secondary1", runDir: "/run/x", cgroup: "fl-secondary1"}
	raw, err := render(kubeletTmpl, n.config("/w/ca.crt", "/w/kubeconfig").withDNS(&Cluster{DNSServiceIP: "10.0.0.10"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"clusterDNS: [10.0.0.10]", "clusterDomain: cluster.local"} {
		if !strings.Contains(string(raw), w) {
			t.Errorf("kubelet config lacks %q:\n%s", w, raw)
		}
	}
	// A cluster without DNS leaves the pods the host's resolv.conf, as before.
	raw, _ = render(kubeletTmpl, n.config("", "").withDNS(&Cluster{}))
	if strings.Contains(string(raw), "clusterDNS") {
		t.Errorf("kubelet config of a cluster without DNS names one:\n%s", raw)
	}
	if err := missingServiceRules("-A KUBE-SERVICES ... default/kubernetes:https ...", nil, &Cluster{DNSServiceIP: "10.0.0.10"}); err == nil ||
		!strings.Contains(err.Error(), "kube-system/kube-dns:dns") {
		t.Errorf("missingServiceRules without the DNS rule = %v", err)
	}
}

// `make tools` builds CoreDNS under the name the bed runs and checkRealNodeTools looks for, from the
// add-ons module, which requires that very version.
func TestCoreDNSIsBuiltByMakeToolsAtItsVersion(t *testing.T) {
	version, err := toolVersion(corednsVersionKey)
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join("..", "tools", "install.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"` + corednsName + `-$` + corednsVersionKey + `=`; !strings.Contains(string(script), want) {
		t.Errorf("install.sh does not build %s", want)
	}
	gomod, err := os.ReadFile(filepath.Join("..", "tools", "addons", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "github.com/coredns/coredns " + version + "\n"; !strings.Contains(string(gomod), want) {
		t.Errorf("test/tools/addons/go.mod does not require %q (versions.env says %s)", want, version)
	}
}

var serviceImportGVR = schema.GroupVersionResource{Group: mcsv1alpha1.GroupName, Version: "v1alpha1", Resource: "serviceimports"}

// TestClusterDNS brings up a primary and two secondaries, each with a real node (the secondaries'
// in network namespaces of their own, on a flat pod network unless
// FLOTILLA_SECONDARY_POD_NETWORK=isolated), and from a pod on each real node:
// reads the resolv.conf its kubelet wrote, and resolves the `kubernetes` Service, by its full name,
// through the search domains and as SRV, a Service that does not exist (NXDOMAIN) and a name outside
// the cluster (SERVFAIL at once: nothing is forwarded). In secondary1 it then
// imports a Service by hand, as an MCS controller would (a ServiceImport hello and an EndpointSlice
// from secondary2), and resolves hello.<ns>.svc.clusterset.local: to the import's IP, then, made
// Headless, to the endpoint's address. It tears down and checks every process is gone and the host
// is as before. It changes the host (as root), so it runs only with FLOTILLA_REAL_NODE=1.
func TestClusterDNS(t *testing.T) {
	realNodeHost(t)
	ctx := t.Context()
	if err := errors.Join(RealNodeAvailable(), SecondaryRealNodesAvailable()); err != nil {
		t.Skip(err)
	}
	before := hostBefore(t)
	work := t.TempDir()
	start := time.Now()
	// The e2e bed's pod network unless told otherwise: with flat, pods reach CoreDNS with their
	// own addresses; with isolated, NATed behind their node's.
	network := PodNetwork(os.Getenv("FLOTILLA_SECONDARY_POD_NETWORK"))
	if network == "" {
		network = PodNetworkFlat
	}
	bed, err := Start(ctx, Options{WorkDir: filepath.Join(work, "bed"), Secondaries: 2, NodesPerSecondary: 1,
		RealNode: true, SecondaryRealNodes: true, SecondaryPodNetwork: network,
		NoMetricsServer: true, NoVolumeProvisioner: true, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if stopped {
			return
		}
		if t.Failed() {
			for _, c := range bed.Clusters() {
				raw, _ := os.ReadFile(filepath.Join(c.dir, "logs", corednsName+".log"))
				t.Logf("CoreDNS of %s, last lines:\n%s", c.Name, lastLines(string(raw), 30))
			}
		}
		_ = bed.SaveLogs(filepath.Join(work, "logs"))
		if err := bed.Stop(context.WithoutCancel(t.Context())); err != nil {
			t.Errorf("stopping the bed: %v", err)
		}
	})
	t.Logf("bed with 3 real nodes (pod network %s) up in %s", network, time.Since(start).Round(100*time.Millisecond))
	tar, err := BuildTestAppImage(ctx, filepath.Join(work, "images"))
	if err != nil {
		t.Fatal(err)
	}
	// The secondaries' real nodes import the application image at bring-up; the primary's does not.
	if err := bed.RealNode.ImportImage(ctx, tar); err != nil {
		t.Fatal(err)
	}

	const ns = "dns-test"
	clients := map[string]*dnsClient{}
	for _, c := range bed.Clusters() {
		node := RealNodeName
		if c.RealNode != nil {
			node = c.RealNode.Name
		}
		if c.DNSServiceIP == "" {
			t.Fatalf("cluster %s has a real node and no DNS", c.Name)
		}
		clients[c.Name] = startDNSClient(t, bed, c, ns, node)
	}

	for _, c := range bed.Clusters() {
		t.Run(c.Name, func(t *testing.T) {
			cl := clients[c.Name]
			conf := cl.run(t, "cat", "/etc/resolv.conf")
			for _, w := range []string{"nameserver " + c.DNSServiceIP, "search " + ns + ".svc.cluster.local svc.cluster.local cluster.local", "options ndots:5"} {
				if !strings.Contains(conf, w) {
					t.Errorf("the pod's resolv.conf lacks %q:\n%s", w, conf)
				}
			}
			svc, err := c.Clientset.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := "Address: " + svc.Spec.ClusterIP
			// The first answer may wait for kube-proxy's rules and CoreDNS's watch: bounded.
			cl.await(t, want, "nslookup", "kubernetes.default.svc.cluster.local")
			if out := cl.run(t, "nslookup", "-type=A", "kubernetes.default"); strings.TrimSpace(out) != want {
				t.Errorf("nslookup kubernetes.default (search domains) = %q, want %q", out, want)
			}
			srv := cl.run(t, "nslookup", "-type=SRV", "_https._tcp.kubernetes.default.svc.cluster.local")
			if !strings.Contains(srv, " 443 kubernetes.default.svc.cluster.local.") {
				t.Errorf("SRV of the kubernetes Service = %q", srv)
			}
			out, err := cl.exec(ctx, "nslookup", "no-such-service.default.svc.cluster.local")
			if err == nil || strings.TrimSpace(out) != "** server can't find no-such-service.default.svc.cluster.local: NXDOMAIN" {
				t.Errorf("nslookup of a missing Service = %q, %v; want NXDOMAIN and exit 1", out, err)
			}
			// Nothing is forwarded: a name outside the cluster's zones fails at once, not by a timeout.
			asked := time.Now()
			out, err = cl.exec(ctx, "nslookup", "example.com")
			if err == nil || strings.TrimSpace(out) != "** server can't find example.com: server misbehaving" || time.Since(asked) > 10*time.Second {
				t.Errorf("nslookup example.com = %q, %v after %s; want SERVFAIL (server misbehaving) at once", out, err, time.Since(asked))
			}
			t.Logf("%s: kubernetes.default.svc.cluster.local is %s through %s; SRV %s", c.Name, svc.Spec.ClusterIP, c.DNSServiceIP, strings.TrimSpace(srv))
		})
	}
	if t.Failed() {
		return
	}
	t.Run("clusterset", func(t *testing.T) { checkClusterSetDNS(t, bed, clients, ns) })
	if t.Failed() {
		return
	}

	var coredns []int
	var usage []string
	for _, c := range bed.Clusters() {
		pid := readPIDFile(corednsPIDFile(c.dir))
		if pid == 0 || !processAlive(pid) {
			t.Fatalf("no CoreDNS running for %s (pid %d)", c.Name, pid)
		}
		coredns = append(coredns, pid)
		usage = append(usage, c.Name+" "+rss(pid))
	}
	t.Logf("RSS of CoreDNS: %s", strings.Join(usage, ", "))
	pids := bed.PIDs()
	for _, pid := range coredns {
		if !slices.Contains(pids, pid) {
			t.Errorf("the bed's PIDs %v lack CoreDNS %d", pids, pid)
		}
	}
	deleteNamespaces(t, bed, ns)
	stopped = true
	if err := bed.Stop(ctx); err != nil {
		t.Fatalf("stopping the bed: %v", err)
	}
	for _, pid := range pids {
		if processAlive(pid) {
			t.Errorf("pid %d still running after Stop", pid)
		}
	}
	if d := before.diff(snapshotForTest(t)); len(d) > 0 {
		t.Fatalf("the host differs after teardown:\n%s", strings.Join(d, "\n"))
	}
}

// checkClusterSetDNS imports hello into secondary1 by hand, from secondary2, and resolves it there.
func checkClusterSetDNS(t *testing.T, bed *Bed, clients map[string]*dnsClient, ns string) {
	ctx := t.Context()
	s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
	// Documentation ranges (RFC 5737): DNS only names them, nothing is dialled.
	const importIP, endpointIP = "203.0.113.42", "198.51.100.7"
	name := "hello." + ns + ".svc." + ClusterSetDomain
	dyn, err := dynamic.NewForConfig(s1.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	imports := dyn.Resource(serviceImportGVR).Namespace(ns)
	si := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": serviceImportGVR.GroupVersion().String(), "kind": "ServiceImport",
		"metadata": map[string]any{"name": "hello", "namespace": ns},
		"spec": map[string]any{
			"type":  string(mcsv1alpha1.ClusterSetIP),
			"ips":   []any{importIP},
			"ports": []any{map[string]any{"name": "tcp", "protocol": "TCP", "port": int64(42)}},
		},
	}}
	if _, err := imports.Create(ctx, si, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ServiceImport hello in %s: %v", s1.Name, err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "hello-" + s2.Name, Namespace: ns, Labels: map[string]string{
			mcsv1alpha1.LabelServiceName: "hello", mcsv1alpha1.LabelSourceCluster: s2.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{endpointIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("tcp"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(42))}},
	}
	if _, err := s1.Clientset.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the EndpointSlice of hello in %s: %v", s1.Name, err)
	}
	cl := clients[s1.Name]
	cl.await(t, "Address: "+importIP, "nslookup", name)
	srv := cl.run(t, "nslookup", "-type=SRV", name)
	if !strings.HasPrefix(srv, name+" service = 0 ") || !strings.Contains(srv, " 42 "+name+".") {
		t.Errorf("SRV of the ClusterSetIP import = %q", srv)
	}
	t.Logf("%s: %s is %s (ClusterSetIP); SRV %s", s1.Name, name, importIP, strings.TrimSpace(srv))
	// Each cluster's CoreDNS reads its own cluster's imports only.
	if out, err := clients[s2.Name].exec(ctx, "nslookup", name); err == nil || !strings.Contains(out, "NXDOMAIN") {
		t.Errorf("%s resolved %s, which only %s imports: %q, %v", s2.Name, name, s1.Name, out, err)
	}

	got, err := imports.Get(ctx, "hello", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unstructured.RemoveNestedField(got.Object, "spec", "ips")
	if err := unstructured.SetNestedField(got.Object, string(mcsv1alpha1.Headless), "spec", "type"); err != nil {
		t.Fatal(err)
	}
	if _, err := imports.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("making hello Headless: %v", err)
	}
	cl.await(t, "Address: "+endpointIP, "nslookup", name)
	srv = cl.run(t, "nslookup", "-type=SRV", name)
	// A Headless import's SRV targets name each endpoint in its source cluster.
	target := strings.ReplaceAll(endpointIP, ".", "-") + "." + s2.Name + "." + name + "."
	if !strings.Contains(srv, " 42 "+target) {
		t.Errorf("SRV of the Headless import = %q, want the target %s", srv, target)
	}
	t.Logf("%s: %s is %s (Headless, from %s); SRV %s", s1.Name, name, endpointIP, s2.Name, strings.TrimSpace(srv))
}

// dnsClient is a pod of the application image on a cluster's real node, for nslookup.
type dnsClient struct {
	kubectl, kubeconfig, cluster, namespace, pod string
}

// startDNSClient creates the namespace ns in c and a pod there on node, and waits until it runs.
// The namespace goes at the end of the test (deleteNamespaces), or with the bed.
func startDNSClient(t *testing.T, bed *Bed, c *Cluster, ns, node string) *dnsClient {
	t.Helper()
	ctx := t.Context()
	cs := c.Clientset
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s in %s: %v", ns, c.Name, err)
	}
	pod := probePod(TestAppImage)
	pod.Name, pod.Namespace = "dns-client", ns
	pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	pod.Spec.Containers[0].Command = []string{"sleep", "infinity"}
	pod.Spec.Containers[0].Args = nil
	pod.Spec.TerminationGracePeriodSeconds = ptr.To(int64(1))
	// The namespace's default ServiceAccount comes a moment after it.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("creating pod %s/%s in %s: %v", ns, pod.Name, c.Name, err)
	}
	var got *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err = cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && podReady(got), nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s in %s not Ready: %v (%+v)", ns, pod.Name, c.Name, err, got)
	}
	return &dnsClient{kubectl: filepath.Join(bed.tools.toolsDir, "kubectl"), kubeconfig: bed.KubeconfigPath,
		cluster: c.Name, namespace: ns, pod: pod.Name}
}

// exec runs a command in the pod (kubectl exec); out is its output, err says it exited non-zero.
func (d *dnsClient) exec(ctx context.Context, command ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	args := append([]string{"--kubeconfig", d.kubeconfig, "--context", d.cluster, "-n", d.namespace, "exec", d.pod, "--"}, command...)
	var stdout strings.Builder
	cmd := exec.CommandContext(ctx, d.kubectl, args...)
	cmd.Stdout = &stdout
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s in %s: %w: %s", strings.Join(command, " "), d.cluster, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// run is exec, failing the test when the command does.
func (d *dnsClient) run(t *testing.T, command ...string) string {
	t.Helper()
	out, err := d.exec(t.Context(), command...)
	if err != nil {
		t.Fatalf("%v (output %q)\n%s", err, out, d.describe(t.Context()))
	}
	return out
}

// describe is the pod's container state and its last run's log, for a failure message.
func (d *dnsClient) describe(ctx context.Context) string {
	base := []string{"--kubeconfig", d.kubeconfig, "--context", d.cluster, "-n", d.namespace}
	state, _ := exec.CommandContext(ctx, d.kubectl, append(base, "get", "pod", d.pod, "-o", "jsonpath={.status.containerStatuses}")...).CombinedOutput()
	logs, _ := exec.CommandContext(ctx, d.kubectl, append(base, "logs", d.pod, "--previous", "--tail", "20")...).CombinedOutput()
	return fmt.Sprintf("pod %s/%s in %s: %s\nprevious log: %s", d.namespace, d.pod, d.cluster, state, logs)
}

// await runs the command until its output is exactly want (one line), for at most a minute.
func (d *dnsClient) await(t *testing.T, want string, command ...string) {
	t.Helper()
	var out string
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		out, last = d.exec(ctx, command...)
		return last == nil && strings.TrimSpace(out) == want, nil
	})
	if err != nil {
		t.Fatalf("%s in %s: got %q (%v), want %q: %v\n%s", strings.Join(command, " "), d.cluster, out, last, want, err, d.describe(t.Context()))
	}
}

// deleteNamespaces deletes ns in every cluster and waits until each is gone with its pods.
func deleteNamespaces(t *testing.T, bed *Bed, ns string) {
	t.Helper()
	ctx := t.Context()
	for _, c := range bed.Clusters() {
		if err := c.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s in %s: %v", ns, c.Name, err)
		}
	}
	for _, c := range bed.Clusters() {
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := c.Clientset.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("namespace %s in %s still there: %v", ns, c.Name, err)
		}
	}
}

// podReady says whether the pod's Ready condition is True: its container runs (it has no probe).
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
