package testbed

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"text/template"
)

// The real node's fixed names and ports. They are host-global, which is why a host runs at most
// one real node (its run dir is the claim).
const (
	// RealNodeName is the real node's Node name (the kubelet's and kube-proxy's hostname override).
	RealNodeName = "realnode"
	// RealNodeKey labels the real node and is the key of its NoSchedule taint: only pods that
	// tolerate it run there, so every pod the bed's users created before (which kwok fakes on the
	// primary's fake node) keeps landing where it did, and a DaemonSet still covers the fake nodes only.
	RealNodeKey = "testbed.flotilla.dev/real-node"
	// PauseImage is the sandbox image, built from test/testbed/pause and imported at bring-up: the
	// bed cannot pull registry.k8s.io/pause.
	PauseImage = "realnode.local/pause:1"

	realNodeRunDir    = "/run/flotilla-realnode" // sockets and state that must be on a tmpfs; the host claim
	realNodeBridge    = "rn0"
	kubeletPort       = 10350 // not 10250, which a host kubelet or the manager's virtual-node kubelet API may hold
	kubeletHealthz    = 10358
	kubeProxyHealthz  = 10356
	kubeProxyMetrics  = 10349
	realNodeCNIDir    = "/usr/lib/cni" // Debian's containernetworking-plugins
	realNodeLeaseSecs = 20             // renewed every 5 s, well inside the primary's 20 s grace period
)

// Candidate ranges for the real node's pods and the primary's Services, first free one wins: a
// range that overlaps a host route would send pod or Service traffic out of the host (G3 of the
// recipe), or make the host unreachable from its pods. 10.0.0.0/24 is kwokctl's own Service range.
var (
	podCIDRCandidates     = []string{"10.244.0.0/24", "10.245.0.0/24", "172.30.244.0/24", "100.96.0.0/24"}
	serviceCIDRCandidates = []string{"10.0.0.0/24", "10.96.0.0/24", "172.30.96.0/24", "100.97.0.0/24"}
)

// pickCIDR returns the first candidate that overlaps none of the taken networks.
func pickCIDR(candidates []string, taken []*net.IPNet) (*net.IPNet, error) {
	for _, c := range candidates {
		_, cand, err := net.ParseCIDR(c)
		if err != nil {
			return nil, fmt.Errorf("candidate range %s: %w", c, err)
		}
		free := true
		for _, t := range taken {
			if t.Contains(cand.IP) || cand.Contains(t.IP) {
				free = false
				break
			}
		}
		if free {
			return cand, nil
		}
	}
	return nil, fmt.Errorf("every candidate range %v overlaps a network of this host", candidates)
}

// nthIP is the n-th address of a network (1 is the first after the network address).
func nthIP(n *net.IPNet, i byte) net.IP {
	ip := append(net.IP(nil), n.IP.To4()...)
	ip[3] += i
	return ip
}

// hostNetworks lists the IPv4 networks this host reaches directly or routes to (not the default
// route), leaving out the real node's own bridge, which a crashed run may have left behind.
func hostNetworks() ([]*net.IPNet, error) {
	var nets []*net.IPNet
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing network interfaces: %w", err)
	}
	for _, ifc := range ifaces {
		if ifc.Name == realNodeBridge {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", ifc.Name, err)
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
				nets = append(nets, &net.IPNet{IP: ipn.IP.Mask(ipn.Mask), Mask: ipn.Mask})
			}
		}
	}
	routes, err := readRoutes()
	if err != nil {
		return nil, err
	}
	for _, r := range routes {
		if r.iface != realNodeBridge && !r.isDefault() {
			nets = append(nets, r.dst)
		}
	}
	return nets, nil
}

type route struct {
	iface string
	dst   *net.IPNet
}

func (r route) isDefault() bool { ones, _ := r.dst.Mask.Size(); return ones == 0 }

// readRoutes reads the IPv4 routing table from /proc/net/route (little-endian hex fields).
func readRoutes() ([]route, error) {
	raw, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil, fmt.Errorf("reading the routing table: %w", err)
	}
	return parseRoutes(raw)
}

func parseRoutes(raw []byte) ([]route, error) {
	var out []route
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for first := true; sc.Scan(); first = false {
		f := strings.Fields(sc.Text())
		if first || len(f) < 8 {
			continue
		}
		dst, err1 := hexIPv4(f[1])
		mask, err2 := hexIPv4(f[7])
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("route %q: %w", sc.Text(), err)
		}
		out = append(out, route{iface: f[0], dst: &net.IPNet{IP: dst, Mask: net.IPMask(mask)}})
	}
	return out, sc.Err()
}

func hexIPv4(s string) (net.IP, error) {
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		return nil, fmt.Errorf("hex address %q: %w", s, err)
	}
	return net.IPv4(byte(v), byte(v>>8), byte(v>>16), byte(v>>24)).To4(), nil
}

// HostIP is the IPv4 address of the interface the default route leaves by: the kubelet's node IP,
// which the API server dials for logs and exec and which kwokctl puts in every serving certificate,
// so pods reach the bed's API servers there.
func HostIP() (net.IP, error) {
	routes, err := readRoutes()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, r := range routes {
		if r.isDefault() {
			names = append(names, r.iface)
		}
	}
	for _, name := range names {
		ifc, err := net.InterfaceByName(name)
		if err != nil {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return ipn.IP.To4(), nil
			}
		}
	}
	return nil, errors.New("no IPv4 address on the interface of a default route: the real node needs one as its node IP")
}

// realNodeConfig is what the real node's configuration files are rendered from.
type realNodeConfig struct {
	Dir, RunDir       string
	PodCIDR           string
	Gateway           string
	Bridge            string
	CNIBinDir         string
	ClientCAFile      string // the primary's CA: the API server authenticates to the kubelet with a certificate it signed
	Kubeconfig        string
	PodLogsDir        string
	Taint             string
	Name              string
	KubeletPort       int
	KubeletHealthz    int
	KubeProxyHealthz  int
	KubeProxyMetrics  int
	LeaseDurationSecs int
	CgroupRoot        string // "" for the cgroup root; a node beside another kubelet gets its own
	NoIPMasq          bool   // pods leave the node with their own address (a flat pod network)
	ClusterDNS        string // the cluster DNS's ClusterIP, "" for none (the pods get the host's resolv.conf)
	ClusterDomain     string
}

// withDNS is c with the cluster's DNS, if the cluster has one, in the kubelet's configuration.
func (c realNodeConfig) withDNS(cluster *Cluster) realNodeConfig {
	if cluster.DNSServiceIP != "" {
		c.ClusterDNS, c.ClusterDomain = cluster.DNSServiceIP, ClusterDomain
	}
	return c
}

// containerd 1.6 on this kind of host: restrict_oom_score_adj because root lacks CAP_SYS_RESOURCE
// (G1: every sandbox failed otherwise); state, runc root and opt moved off the host defaults (G8).
var containerdTmpl = template.Must(template.New("containerd").Parse(`version = 2
root = "{{.Dir}}/containerd/root"
state = "{{.RunDir}}/state"
[grpc]
  address = "{{.RunDir}}/containerd.sock"
[ttrpc]
  address = "{{.RunDir}}/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{{.Dir}}/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "` + PauseImage + `"
  restrict_oom_score_adj = true
  enable_unprivileged_ports = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{{.RunDir}}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{{.CNIBinDir}}"
    conf_dir = "{{.Dir}}/cni/net.d"
`))

// containerd adds the loopback network itself; host-local keeps its leases in the run dir.
var cniTmpl = template.Must(template.New("cni").Parse(`{"cniVersion": "0.4.0", "name": "realnode", "plugins": [
  {"type": "bridge", "bridge": "{{.Bridge}}", "isGateway": true, "ipMasq": {{not .NoIPMasq}}, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "{{.PodCIDR}}", "gateway": "{{.Gateway}}"}]],
            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "{{.RunDir}}/cni-ipam"}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
`))

// The kubelet: cgroup v1 allowed, cgroupfs (no systemd), no image GC (imported images cannot be
// pulled back), pod logs in the node's dir, a short lease for the primary's short grace period;
// the cluster's DNS, where it has one, for the pods' resolv.conf (search domains and nameserver).
var kubeletTmpl = template.Must(template.New("kubelet").Parse(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://{{.RunDir}}/containerd.sock
address: 0.0.0.0
port: {{.KubeletPort}}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {{.KubeletHealthz}}
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "{{.ClientCAFile}}"}
authorization: {mode: Webhook}
podCIDR: {{.PodCIDR}}
maxPods: 20
failSwapOn: false
resolvConf: /etc/resolv.conf
podLogsDir: "{{.PodLogsDir}}"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: "2%", imagefs.available: "2%"}
serializeImagePulls: false
syncFrequency: 10s
nodeLeaseDurationSeconds: {{.LeaseDurationSecs}}
registerWithTaints:
- {key: "{{.Taint}}", value: "true", effect: NoSchedule}
{{- if .CgroupRoot}}
cgroupRoot: {{.CgroupRoot}}
{{- end}}
{{- if .ClusterDNS}}
clusterDNS: [{{.ClusterDNS}}]
clusterDomain: {{.ClusterDomain}}
{{- end}}
`))

// kube-proxy in iptables mode; localhostNodePorts off (it would set route_localnet) and conntrack
// limits left alone, so that it changes no sysctl.
var kubeProxyTmpl = template.Must(template.New("kube-proxy").Parse(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "{{.Kubeconfig}}"}
hostnameOverride: {{.Name}}
mode: iptables
clusterCIDR: {{.PodCIDR}}
nodePortAddresses: [primary]
healthzBindAddress: 127.0.0.1:{{.KubeProxyHealthz}}
metricsBindAddress: 127.0.0.1:{{.KubeProxyMetrics}}
iptables: {localhostNodePorts: false}
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`))

func render(t *template.Template, c realNodeConfig) ([]byte, error) {
	var b bytes.Buffer
	if err := t.Execute(&b, c); err != nil {
		return nil, fmt.Errorf("rendering the %s configuration: %w", t.Name(), err)
	}
	return b.Bytes(), nil
}

// kwokctlConfig adds the `kubernetes` Service IP to the API server's certificate: in-cluster
// clients dial it, and kwokctl's certificate has only names, localhost and the host's IPs (G2).
// There is no command-line flag for it.
func kwokctlConfig(serviceIP net.IP) []byte {
	return fmt.Appendf(nil, `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  kubeApiserverCertSANs: [%q]
`, serviceIP.String())
}
