package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"text/template"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	mcscrd "sigs.k8s.io/mcs-api/config/crd"
	"sigs.k8s.io/yaml"
)

// Every cluster with a real node has a cluster DNS: a CoreDNS (built by `make tools` from
// test/tools/addons/coredns) that runs on the host, reads its cluster's API server as a
// ServiceAccount of its own, and answers from its kubernetes plugin:
//   - <service>.<namespace>.svc.cluster.local (and SRV, and pods' <a-b-c-d>.<namespace>.pod.cluster.local);
//   - <service>.<namespace>.svc.clusterset.local from the cluster's ServiceImports (the plugin's
//     Multi-Cluster Services option): a ClusterSetIP import's IPs, or for a Headless one the ready
//     addresses of the EndpointSlices labelled multicluster.kubernetes.io/service-name;
//   - reverse lookups of those addresses.
//
// It forwards nothing: the machines the bed runs on may be offline, and a pod asking for any other
// name gets SERVFAIL at once rather than a timeout.
//
// Pods reach it as a real cluster's pods do, at the ClusterIP of kube-system/kube-dns, which their
// kubelet's clusterDNS names: the node's kube-proxy sends it to CoreDNS's port on the host, at an
// address the node's pods already reach (the host IP for the primary's node, the host's end of the
// veth for a secondary's). That port is any free one, so the host's port 53 (often a local
// resolver's) is never needed. CoreDNS is recorded beside kwokctl's processes, like metrics-server:
// stopping or deleting the cluster stops it, and StartCluster starts it again.

const (
	// ClusterDomain is the DNS domain of every cluster's Services and pods (the kubelets' clusterDomain).
	ClusterDomain = "cluster.local"
	// ClusterSetDomain is the Multi-Cluster Services domain, answered from the cluster's ServiceImports.
	ClusterSetDomain = "clusterset.local"
	// DNSServiceName is the Service in kube-system whose ClusterIP is the cluster DNS, named as in
	// kubeadm's clusters, where tools look for it.
	DNSServiceName = "kube-dns"

	corednsName       = "coredns"
	corednsVersionKey = "COREDNS_VERSION"
	// corednsRole is the ClusterRole and ClusterRoleBinding of CoreDNS's ServiceAccount (kube-system/coredns).
	corednsRole = "flotilla-testbed:coredns"
	// corednsTokenLifetime outlasts any bed: a `make dev-up` bed may run for days, and nothing
	// renews the token in CoreDNS's kubeconfig.
	corednsTokenLifetime = 365 * 24 * time.Hour
	// corednsCacheTTL caps how long CoreDNS keeps an answer, negative ones too: a spec that changes
	// a Service or a ServiceImport sees the new answer within seconds.
	corednsCacheTTL = 5
	// dnsServiceIndex places the DNS Service's ClusterIP at the tenth address of the Service range,
	// as kubeadm does; in a /24 that is in the band the API server hands out only when asked, so
	// no Service created earlier takes it.
	dnsServiceIndex = 10
	// secondaryServiceCIDR is a secondary's Service range: kwokctl gives it no
	// --service-cluster-ip-range (see secondaryServiceIP).
	secondaryServiceCIDR = "10.0.0.0/24"
)

// corednsRules are the reads of CoreDNS's kubernetes plugin with `pods insecure` (which watches
// no pods) and `multicluster`: nothing more.
var corednsRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"services", "namespaces"}, Verbs: []string{"list", "watch"}},
	{APIGroups: []string{discoveryv1.GroupName}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	{APIGroups: []string{"multicluster.x-k8s.io"}, Resources: []string{"serviceimports"}, Verbs: []string{"list", "watch"}},
}

// dnsServiceIP is the cluster DNS's ClusterIP in a Service range.
func dnsServiceIP(serviceCIDR string) (string, error) {
	_, n, err := net.ParseCIDR(serviceCIDR)
	if err != nil {
		return "", fmt.Errorf("the Service range %q: %w", serviceCIDR, err)
	}
	if n.IP.To4() == nil {
		return "", fmt.Errorf("the Service range %s is not IPv4: the bed's clusters are IPv4 only", serviceCIDR)
	}
	return nthIP(n, dnsServiceIndex).String(), nil
}

// corednsConfig is what a cluster's Corefile is rendered from.
type corednsConfig struct {
	Addr, Kubeconfig                string
	Port, ReadyPort, CacheTTL       int
	ClusterDomain, ClusterSetDomain string
}

// corefileTmpl: one server for every name, so that a name outside the cluster's zones, and the
// reverse lookup of an address the cluster does not know, is answered at once: SERVFAIL, as the
// kubernetes plugin has no plugin after it to pass the question to (errors logs each). The ready
// endpoint is how the bed knows the plugin has listed what it watches (ServiceImports included).
var corefileTmpl = template.Must(template.New("Corefile").Parse(`.:{{.Port}} {
    bind {{.Addr}}
    ready 127.0.0.1:{{.ReadyPort}}
    errors
    log
    cache {{.CacheTTL}}
    kubernetes {{.ClusterDomain}} {{.ClusterSetDomain}} in-addr.arpa ip6.arpa {
        kubeconfig {{.Kubeconfig}}
        pods insecure
        multicluster {{.ClusterSetDomain}}
        fallthrough in-addr.arpa ip6.arpa
    }
}
`))

func renderCorefile(cfg corednsConfig) ([]byte, error) {
	var b bytes.Buffer
	if err := corefileTmpl.Execute(&b, cfg); err != nil {
		return nil, fmt.Errorf("rendering the Corefile: %w", err)
	}
	return b.Bytes(), nil
}

// corednsBinary is the CoreDNS `make tools` built, named with its version.
func corednsBinary(toolsDir string) (string, error) {
	version, err := toolVersion(corednsVersionKey)
	if err != nil {
		return "", err
	}
	return filepath.Join(toolsDir, corednsName+"-"+version), nil
}

// corednsPIDFile is where the bed records a cluster's CoreDNS, beside kwokctl's PID files.
func corednsPIDFile(clusterDir string) string {
	return filepath.Join(clusterDir, "pids", corednsName+".pid")
}

// startClusterDNS installs the Multi-Cluster Services CRDs, gives CoreDNS its identity, starts it,
// waits until it has synced, and points kube-system/kube-dns at it. Run again after the cluster
// restarted, it starts CoreDNS on a new port and updates the EndpointSlice.
func (b *Bed) startClusterDNS(ctx context.Context, c *Cluster) error {
	start := time.Now()
	bin, err := corednsBinary(b.tools.toolsDir)
	if err != nil {
		return err
	}
	dir := filepath.Join(c.dir, corednsName)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := InstallMCSCRDs(ctx, c); err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeCoreDNSKubeconfig(ctx, c, kubeconfig); err != nil {
		return err
	}
	port, err := freeDNSPort(c.dnsAddr)
	if err != nil {
		return err
	}
	readyPort, err := FreePort()
	if err != nil {
		return err
	}
	corefile, err := renderCorefile(corednsConfig{Addr: c.dnsAddr, Kubeconfig: kubeconfig, Port: port, ReadyPort: readyPort,
		CacheTTL: corednsCacheTTL, ClusterDomain: ClusterDomain, ClusterSetDomain: ClusterSetDomain})
	if err != nil {
		return err
	}
	corefilePath := filepath.Join(dir, "Corefile")
	if err := writeFile(corefilePath, corefile); err != nil {
		return err
	}
	logPath := filepath.Join(c.dir, "logs", corednsName+".log")
	pid, err := StartDaemon(corednsName+"-"+c.Name, bin, []string{"-conf", corefilePath}, logPath)
	if err != nil {
		return err
	}
	if err := os.WriteFile(corednsPIDFile(c.dir), []byte(strconv.Itoa(pid)), 0o600); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return fmt.Errorf("recording the CoreDNS of %s: %w", c.Name, err)
	}
	// A CoreDNS that does not become the cluster's DNS is stopped here: a second start would
	// record another PID over its own, and nothing would stop it.
	stop := func() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_ = os.Remove(corednsPIDFile(c.dir))
	}
	if err := waitCoreDNSReady(ctx, pid, readyPort); err != nil {
		stop()
		raw, _ := os.ReadFile(logPath)
		return fmt.Errorf("the CoreDNS of %s is not ready: %w\nits log, last lines:\n%s", c.Name, err, lastLines(string(raw), 15))
	}
	if err := registerDNS(ctx, c, int32(port)); err != nil {
		stop()
		return err
	}
	fmt.Fprintf(b.log, "testbed: cluster %s: CoreDNS ready in %s at %s:%d, Service %s/%s %s\n", c.Name,
		time.Since(start).Round(100*time.Millisecond), c.dnsAddr, port, metav1.NamespaceSystem, DNSServiceName, c.DNSServiceIP)
	return nil
}

// freeDNSPort is a port FreePort hands out that is also free on addr for both TCP and UDP, which
// CoreDNS listens on there.
func freeDNSPort(addr string) (int, error) {
	for range 20 {
		port, err := FreePort()
		if err != nil {
			return 0, err
		}
		hostPort := net.JoinHostPort(addr, strconv.Itoa(port))
		l, err := net.Listen("tcp", hostPort)
		if err != nil {
			continue
		}
		_ = l.Close()
		u, err := net.ListenPacket("udp", hostPort)
		if err != nil {
			continue
		}
		_ = u.Close()
		return port, nil
	}
	return 0, fmt.Errorf("finding a port free for TCP and UDP on %s: none after 20 tries", addr)
}

// waitCoreDNSReady polls CoreDNS's ready endpoint, which answers 200 once the kubernetes plugin has
// listed everything it watches; it fails at once when the process exits.
func waitCoreDNSReady(ctx context.Context, pid, readyPort int) error {
	url := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(readyPort)) + "/ready"
	client := &http.Client{Timeout: 2 * time.Second}
	last := "no answer yet"
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if !processAlive(pid) {
			return false, errors.New("it exited")
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		_ = resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("%s (last: %s): %w", url, last, err)
	}
	return nil
}

// InstallMCSCRDs creates the Multi-Cluster Services CRDs (ServiceExport and ServiceImport, from
// sigs.k8s.io/mcs-api) in c where they are absent and waits until they are established. CRDs that
// exist are left as they are (Flotilla's chart renders them too). Those it creates are no Helm
// release's: a chart installed after them takes them over with `helm install --take-ownership`.
func InstallMCSCRDs(ctx context.Context, c *Cluster) error {
	cs, err := apiextensionsclient.NewForConfig(c.RESTConfig)
	if err != nil {
		return fmt.Errorf("building apiextensions client for %s: %w", c.Name, err)
	}
	crds := cs.ApiextensionsV1().CustomResourceDefinitions()
	var names []string
	for _, raw := range [][]byte{mcscrd.ServiceExportCRD, mcscrd.ServiceImportCRD} {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			return fmt.Errorf("decoding an MCS CRD: %w", err)
		}
		if _, err := crds.Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s in %s: %w", crd.Name, c.Name, err)
		}
		names = append(names, crd.Name)
	}
	return waitCRDsEstablished(ctx, cs, names)
}

// writeCoreDNSKubeconfig writes the cluster's kubeconfig with a token of CoreDNS's own
// ServiceAccount instead of the admin's certificate, creating the account and its ClusterRole
// (corednsRules) where they are absent.
func writeCoreDNSKubeconfig(ctx context.Context, c *Cluster, path string) error {
	ns := metav1.NamespaceSystem
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: corednsName, Namespace: ns}}
	if _, err := c.Clientset.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ServiceAccount %s/%s in %s: %w", ns, corednsName, c.Name, err)
	}
	rbac := c.Clientset.RbacV1()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: corednsRole}, Rules: corednsRules}
	if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ClusterRole %s in %s: %w", corednsRole, c.Name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: corednsRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: corednsRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: corednsName, Namespace: ns}},
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ClusterRoleBinding %s in %s: %w", corednsRole, c.Name, err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(corednsTokenLifetime / time.Second))}}
	tr, err := c.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, corednsName, tr, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("requesting a token for %s/%s in %s: %w", ns, corednsName, c.Name, err)
	}
	cfg, err := clientcmd.LoadFromFile(c.KubeconfigPath)
	if err != nil {
		return fmt.Errorf("reading %s: %w", c.KubeconfigPath, err)
	}
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{c.Name: {Token: tr.Status.Token}}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// registerDNS creates kube-system/kube-dns at the cluster's DNS ClusterIP, without selector, and
// (again, after a restart) its EndpointSlice: CoreDNS's address and port on the host.
func registerDNS(ctx context.Context, c *Cluster, port int32) error {
	ns := metav1.NamespaceSystem
	labels := map[string]string{"k8s-app": DNSServiceName}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: DNSServiceName, Namespace: ns, Labels: labels},
		Spec: corev1.ServiceSpec{ClusterIP: c.DNSServiceIP, Ports: []corev1.ServicePort{
			{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53},
			{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53},
		}},
	}
	// Read first: after a restart the Service is there, and the API server refuses a create of it
	// for its address (already allocated) before it would say it exists.
	_, err := c.Clientset.CoreV1().Services(ns).Get(ctx, DNSServiceName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := c.Clientset.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating Service %s/%s at %s in %s: %w", ns, DNSServiceName, c.DNSServiceIP, c.Name, err)
		}
	case err != nil:
		return fmt.Errorf("reading Service %s/%s in %s: %w", ns, DNSServiceName, c.Name, err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: DNSServiceName, Namespace: ns, Labels: map[string]string{
			discoveryv1.LabelServiceName: DNSServiceName,
			// Not the EndpointSlice controller's: it would otherwise take over a slice it did not make.
			discoveryv1.LabelManagedBy: "testbed.flotilla.dev",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{c.dnsAddr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(port)},
			{Name: ptr.To("dns-tcp"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(port)},
		},
	}
	slices := c.Clientset.DiscoveryV1().EndpointSlices(ns)
	if err := slices.Delete(ctx, DNSServiceName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("replacing the %s EndpointSlice in %s: %w", DNSServiceName, c.Name, err)
	}
	if _, err := slices.Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the %s EndpointSlice in %s: %w", DNSServiceName, c.Name, err)
	}
	return nil
}
