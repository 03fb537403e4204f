package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// A secondary's real node runs in a network namespace of its own (fl-<secondary>), reached from
// the host over a veth /30, so that several real nodes share this host: each has its own
// containerd, kubelet, kube-proxy, CNI bridge, pod range, iptables and ports. One process, the
// node's containerd, holds the namespaces: it is started in the node's network namespace and a
// new mount namespace (slave propagation: the host's mounts show inside, nothing mounted inside
// leaks out) whose tmpfs shadow the host paths containerd and the kubelet write whatever their
// configuration says. The kubelet and kube-proxy enter its network and mount namespaces.
const (
	// netnsRunRoot holds one dir per secondary real node (its claim, sockets and state) and the
	// host's state before the first of them (netnsHostFile), restored when the last one goes.
	netnsRunRoot  = "/run/flotilla-netns"
	netnsHostFile = "host.json"
	netnsBridge   = "cni0" // inside the node's network namespace: no clash with the host's
	// SecondaryRealNodeSuffix makes a secondary's real node name: <secondary>-real.
	SecondaryRealNodeSuffix = "-real"
)

// netnsShadows are the host paths a kubelet or containerd 1.6 writes whatever its configuration
// says (N2; /run/containerd holds the shims' sockets, /run/netns the pods' network namespaces).
// Inside the node's mount namespace each is a tmpfs of its own.
var netnsShadows = []string{"/var/lib/kubelet", "/var/lib/cni", "/var/log/containers", "/run/containerd", "/run/netns"}

// Candidate ranges, first free one wins: the veth /30s are carved from netnsLinkCandidates (the
// i-th secondary takes the i-th /30), pod ranges are the i-th /24 of netnsPodCandidates.
var (
	netnsLinkCandidates = []string{"172.31.250.0/24", "100.127.250.0/24"}
	netnsPodCandidates  = []string{"10.246.0.0/16", "172.29.0.0/16", "100.98.0.0/16"}
)

// SecondaryRealNode is a real node of a secondary cluster (Options.SecondaryRealNodes): containerd,
// a kubelet and kube-proxy in the network namespace Netns, its pods on a bridge there. It is
// tainted and labelled RealNodeKey=true as the primary's real node is.
type SecondaryRealNode struct {
	// Name is the Node's name, <secondary>-real.
	Name string
	// Cluster is the secondary's name.
	Cluster string
	// Netns is the network namespace, fl-<secondary> (`ip netns exec` works in it).
	Netns string
	// HostIP is the host's end of the veth: the node reaches its API server there.
	HostIP string
	// NodeIP is the node's end of the veth, its InternalIP: the API server reaches the kubelet there.
	NodeIP string
	// PodCIDR is the pods' range, GatewayIP their gateway on the node's bridge.
	PodCIDR, GatewayIP string
	// Dir holds the node's configuration, state and logs (logs/ outlives the teardown).
	Dir string

	toolsDir string
	runDir   string
	hostVeth string
	nodeVeth string
	cgroup   string // its kubelet's cgroupRoot, without the leading slash
	flat     bool   // PodNetworkFlat: the host routes PodCIDR to NodeIP
	state    *netnsNodeState
	log      io.Writer
}

// netnsNodeState is what a secondary real node's teardown needs, written before the host changes.
type netnsNodeState struct {
	Dir        string              `json:"dir"`
	RunDir     string              `json:"runDir"`
	Node       string              `json:"node"`
	Netns      string              `json:"netns"`
	HostVeth   string              `json:"hostVeth"`
	Cgroup     string              `json:"cgroup"`
	Kubeconfig string              `json:"kubeconfig,omitempty"` // the secondary's, from the host
	Procs      map[string]hostProc `json:"procs"`
}

// netnsHostState is the host as the first secondary real node found it.
type netnsHostState struct {
	Sysctls map[string]string `json:"sysctls"` // the kubelet's are host-global (G7)
	// NewPaths were created as mount points of netnsShadows (or by `ip netns add`); removed when empty.
	NewPaths []string `json:"newPaths"`
	// RunNetnsMounted: /run/netns was a mount point (`ip netns add` makes it one).
	RunNetnsMounted bool `json:"runNetnsMounted"`
}

// SecondaryRealNodesAvailable says why this host cannot run real nodes in the secondaries, or nil.
func SecondaryRealNodesAvailable() error { return SecondaryRealNodesAvailableIn("") }

// SecondaryRealNodesAvailableIn is SecondaryRealNodesAvailable with the tools in toolsDir.
func SecondaryRealNodesAvailableIn(toolsDir string) error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("secondary real nodes: need Linux, not %s", runtime.GOOS)
	}
	var why []error
	if os.Geteuid() != 0 {
		why = append(why, errors.New("not root: namespaces, containerd, the kubelet and iptables need root"))
	} else if err := checkCapabilities(); err != nil {
		why = append(why, err)
	}
	for _, p := range []string{"nsenter", "unshare", "sh", "mount"} {
		if _, err := exec.LookPath(p); err != nil {
			why = append(why, fmt.Errorf("missing %s (util-linux)", p))
		}
	}
	why = append(why, checkHostPrograms(), checkRealNodeTools(toolsDir), checkOverlay(), checkNodeCgroups())
	if err := errors.Join(why...); err != nil {
		return fmt.Errorf("secondary real nodes unavailable: %w", err)
	}
	return nil
}

// checkNodeCgroups wants the kubelet's cgroup v1 controllers, or cgroup v2, writable.
func checkNodeCgroups() error {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return writable("/sys/fs/cgroup")
	}
	for _, c := range realNodeCgroups {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c)); err != nil {
			return fmt.Errorf("cgroup v1 controller %s not mounted under /sys/fs/cgroup", c)
		}
	}
	return writable("/sys/fs/cgroup/memory")
}

// planSecondaryRealNodes picks each secondary's node names, addresses and ranges, away from the
// host's networks and the primary's real node's pods; it changes nothing on the host.
func planSecondaryRealNodes(workDir, toolsDir string, secondaries []*Cluster, primary *RealNode, log io.Writer) ([]*SecondaryRealNode, error) {
	taken, err := hostNetworks()
	if err != nil {
		return nil, err
	}
	if primary != nil {
		_, p, _ := net.ParseCIDR(primary.PodCIDR)
		taken = append(taken, p)
	}
	var nodes []*SecondaryRealNode
	for i, c := range secondaries {
		if i >= 60 {
			return nil, errors.New("at most 60 secondaries get a real node")
		}
		link, err := pickCIDR(subnets(netnsLinkCandidates, 30, i), taken)
		if err != nil {
			return nil, fmt.Errorf("veth range of %s: %w", c.Name, err)
		}
		pods, err := pickCIDR(subnets(netnsPodCandidates, 24, i), append(taken, link))
		if err != nil {
			return nil, fmt.Errorf("pod range of %s: %w", c.Name, err)
		}
		taken = append(taken, link, pods)
		n := &SecondaryRealNode{
			Name: c.Name + SecondaryRealNodeSuffix, Cluster: c.Name, Netns: "fl-" + c.Name,
			HostIP: nthIP(link, 1).String(), NodeIP: nthIP(link, 2).String(),
			PodCIDR: pods.String(), GatewayIP: nthIP(pods, 1).String(),
			Dir: filepath.Join(workDir, "realnode-"+c.Name), toolsDir: toolsDir,
			runDir: filepath.Join(netnsRunRoot, c.Name), cgroup: "fl-" + c.Name, log: log,
		}
		// Interface names have at most 15 bytes.
		suffix := strconv.Itoa(i + 1)
		n.hostVeth, n.nodeVeth = "flh-"+c.Name, "fln-"+c.Name
		if len(n.hostVeth) > 15 {
			n.hostVeth, n.nodeVeth = "flh-s"+suffix, "fln-s"+suffix
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// subnets is the i-th subnet of the given size in each candidate range (those that have one).
func subnets(ranges []string, bits, i int) []string {
	var out []string
	for _, r := range ranges {
		_, n, err := net.ParseCIDR(r)
		if err != nil {
			continue
		}
		ones, _ := n.Mask.Size()
		if bits < ones || i >= 1<<(bits-ones) {
			continue
		}
		ip := n.IP.To4()
		v := uint32(ip[0])<<24 | uint32(ip[1])<<16 | uint32(ip[2])<<8 | uint32(ip[3])
		v += uint32(i) << (32 - bits)
		out = append(out, fmt.Sprintf("%d.%d.%d.%d/%d", byte(v>>24), byte(v>>16), byte(v>>8), byte(v), bits))
	}
	return out
}

// secondaryRealNodeExtraArgs are the secondary's settings for a real node beside kwok's fake ones: kwok
// leaves unannotated nodes alone (N4), and the API server dials the kubelet at its InternalIP, as
// its Hostname does not resolve (N5; kwok's nodes have only a Hostname, which still comes next).
func secondaryRealNodeExtraArgs() []string {
	return []string{
		"kwok-controller=manage-all-nodes=false",
		"kwok-controller=manage-nodes-with-annotation-selector=" + FakeNodeAnnotation + "=fake",
		"kube-apiserver=kubelet-preferred-address-types=InternalIP,Hostname,InternalDNS,ExternalDNS,ExternalIP",
	}
}

// secondaryServiceIP is the `kubernetes` Service's ClusterIP in a secondary: kwokctl gives it
// no --service-cluster-ip-range, so its range is 10.0.0.0/24. Only the secondary real node's
// kube-proxy routes it, inside the node's network namespace.
const secondaryServiceIP = "10.0.0.1"

func (n *SecondaryRealNode) kwokctlConfigPath() string { return filepath.Join(n.Dir, "kwokctl.yaml") }

// prepareFiles writes what the secondary's kwokctl reads: the `kubernetes` Service IP in its API
// server's certificate, which pods using in-cluster configuration dial (G2).
func (n *SecondaryRealNode) prepareFiles() error {
	return writeFile(n.kwokctlConfigPath(), kwokctlConfig(net.ParseIP(secondaryServiceIP)))
}

// claim takes this node's slot on the host (cleaning up after a crashed bed whose slot it was),
// saves what teardown needs, then creates the network namespace, the veth and the cgroups.
func (n *SecondaryRealNode) claim(ctx context.Context) error {
	unlock, err := lockHost(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := releaseStaleNetnsClaims(ctx, n.runDir, filepath.Dir(n.Dir), n.log); err != nil {
		return err
	}
	if _, err := os.Lstat(filepath.Join("/run/netns", n.Netns)); err == nil {
		return fmt.Errorf("network namespace %s exists and no bed claims it: another program's, or remove it with `ip netns del %s`", n.Netns, n.Netns)
	}
	if _, err := os.Lstat(filepath.Join("/sys/class/net", n.hostVeth)); err == nil {
		return fmt.Errorf("link %s exists and no bed claims it: `ip link del %s`", n.hostVeth, n.hostVeth)
	}
	if dirs := cgroupDirs(n.cgroup); len(dirs) > 0 {
		return fmt.Errorf("cgroups %v exist and no bed claims them", dirs)
	}
	if err := os.MkdirAll(filepath.Join(n.Dir, "logs"), 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", n.Dir, err)
	}
	if err := ensureNetnsHostState(); err != nil {
		return err
	}
	if err := os.Mkdir(n.runDir, 0o700); err != nil {
		return fmt.Errorf("claiming %s: %w", n.runDir, err)
	}
	n.state = &netnsNodeState{Dir: n.Dir, RunDir: n.runDir, Node: n.Name, Netns: n.Netns, HostVeth: n.hostVeth,
		Cgroup: n.cgroup, Procs: map[string]hostProc{}}
	if err := n.state.save(); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(n.runDir, "owner"), []byte(n.Dir+"\n")); err != nil {
		return err
	}
	for _, p := range netnsShadows {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("creating the mount point %s: %w", p, err)
		}
	}
	inNs := func(args ...string) []string { return append([]string{"ip", "-n", n.Netns}, args...) }
	cmds := [][]string{
		{"ip", "netns", "add", n.Netns},
		{"ip", "link", "add", n.hostVeth, "type", "veth", "peer", "name", n.nodeVeth},
		{"ip", "link", "set", n.nodeVeth, "netns", n.Netns},
		{"ip", "addr", "add", n.HostIP + "/30", "dev", n.hostVeth},
		{"ip", "link", "set", n.hostVeth, "up"},
		inNs("link", "set", "lo", "up"),
		inNs("addr", "add", n.NodeIP+"/30", "dev", n.nodeVeth),
		inNs("link", "set", n.nodeVeth, "up"),
		inNs("route", "add", "default", "via", n.HostIP),
	}
	if n.flat {
		// The route goes with the veth; ip_forward is restored from host.json by the last node.
		cmds = append(cmds, []string{"ip", "route", "add", n.PodCIDR, "via", n.NodeIP, "dev", n.hostVeth})
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
			return fmt.Errorf("letting the host forward between the pod networks: %w", err)
		}
	}
	for _, cmd := range cmds {
		if out, err := exec.CommandContext(ctx, cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(cmd, " "), err, out)
		}
	}
	return makeNodeCgroups(n.cgroup)
}

// ensureNetnsHostState records the host's state before the first secondary real node changes it.
func ensureNetnsHostState() error {
	path := filepath.Join(netnsRunRoot, netnsHostFile)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	st := netnsHostState{Sysctls: map[string]string{}}
	for _, k := range realNodeSysctls {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			st.Sysctls[k] = strings.TrimSpace(string(v))
		}
	}
	for _, p := range netnsShadows {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			st.NewPaths = append(st.NewPaths, firstMissing(p))
		}
	}
	mps, err := mountsUnder("/run/netns")
	if err != nil {
		return err
	}
	for _, mp := range mps {
		st.RunNetnsMounted = st.RunNetnsMounted || mp == "/run/netns"
	}
	raw, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the host's state: %w", err)
	}
	if err := os.MkdirAll(netnsRunRoot, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", netnsRunRoot, err)
	}
	return writeFile(path, raw)
}

// firstMissing is the outermost missing dir on the way to p (what creating p creates).
func firstMissing(p string) string {
	for {
		parent := filepath.Dir(p)
		if parent == p {
			return p
		}
		if _, err := os.Lstat(parent); err == nil {
			return p
		}
		p = parent
	}
}

// cgroupHierarchies are the cgroup v1 hierarchies under /sys/fs/cgroup (each once), or the v2 root.
func cgroupHierarchies() []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{"/sys/fs/cgroup"}
	}
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	seen := map[string]bool{}
	var out []string
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		real, err := filepath.EvalSymlinks(p)
		if err != nil || seen[real] {
			continue
		}
		if fi, err := os.Stat(filepath.Join(real, "cgroup.procs")); err != nil || fi.IsDir() {
			continue
		}
		seen[real] = true
		out = append(out, real)
	}
	return out
}

// cgroupDirs are the existing dirs of cgroup name, one per hierarchy.
func cgroupDirs(name string) []string {
	var out []string
	for _, h := range cgroupHierarchies() {
		if _, err := os.Stat(filepath.Join(h, name)); err == nil {
			out = append(out, filepath.Join(h, name))
		}
	}
	return out
}

// makeNodeCgroups creates the kubelet's cgroupRoot in every hierarchy (the kubelet refuses one
// that does not exist, N3), with cpuset's cpus and mems copied from the root.
func makeNodeCgroups(name string) error {
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		if h == "/sys/fs/cgroup" {
			// cgroup v2: hand the root's controllers down to the kubelet's tree.
			raw, _ := os.ReadFile(filepath.Join(h, "cgroup.subtree_control"))
			for _, c := range strings.Fields(string(raw)) {
				_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+c), 0o644)
			}
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				continue // not the cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
				return fmt.Errorf("seeding %s: %w", filepath.Join(dir, f), err)
			}
		}
	}
	return nil
}

// prepare writes containerd's and the CNI's configuration, starts containerd in the node's
// namespaces and imports the pause image and the application image (tarballs each function builds).
func (n *SecondaryRealNode) prepare(ctx context.Context, pauseTar, appTar func() (string, error)) error {
	start := time.Now()
	cfg := n.config("", "")
	if err := writeRuntimeConfig(n.Dir, cfg); err != nil {
		return err
	}
	bin, err := exec.LookPath("containerd")
	if err != nil {
		return fmt.Errorf("finding containerd: %w", err)
	}
	// The holder: the node's network namespace, a new mount namespace whose tmpfs shadow the
	// host paths (N1, N2), and containerd in it. Its mounts go when its last process exits.
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, p := range netnsShadows {
		fmt.Fprintf(&script, "mount -t tmpfs -o mode=0755 tmpfs %s\n", p)
	}
	fmt.Fprintf(&script, "exec %s --config %s\n", bin, filepath.Join(n.Dir, "containerd", "config.toml"))
	holder := filepath.Join(n.Dir, "holder.sh")
	if err := writeFile(holder, []byte(script.String())); err != nil {
		return err
	}
	if err := n.startProc(ctx, "containerd", "nsenter", "--net="+filepath.Join("/run/netns", n.Netns),
		"unshare", "-m", "--propagation", "slave", "sh", holder); err != nil {
		return err
	}
	err = waitFor(ctx, 30*time.Second, "containerd to answer", func(ctx context.Context) error {
		_, err := n.ctr(ctx, "version")
		return err
	})
	if err != nil {
		return n.withLog(err, "containerd")
	}
	for _, build := range []func() (string, error){pauseTar, appTar} {
		tar, err := build()
		if err != nil {
			return err
		}
		if err := n.ImportImage(ctx, tar); err != nil {
			return err
		}
	}
	fmt.Fprintf(n.log, "testbed: real node %s: netns %s, containerd up, pause and application images imported in %s\n",
		n.Name, n.Netns, time.Since(start).Round(100*time.Millisecond))
	return nil
}

func (n *SecondaryRealNode) config(caFile, kubeconfig string) realNodeConfig {
	return realNodeConfig{
		Dir: n.Dir, RunDir: n.runDir, PodCIDR: n.PodCIDR, Gateway: n.GatewayIP, Bridge: netnsBridge,
		CNIBinDir: realNodeCNIDir, ClientCAFile: caFile, Kubeconfig: kubeconfig,
		PodLogsDir: filepath.Join(n.Dir, "pod-logs"), Taint: RealNodeKey, Name: n.Name,
		KubeletPort: kubeletPort, KubeletHealthz: kubeletHealthz,
		KubeProxyHealthz: kubeProxyHealthz, KubeProxyMetrics: kubeProxyMetrics, LeaseDurationSecs: realNodeLeaseSecs,
		CgroupRoot: "/" + n.cgroup, NoIPMasq: n.flat,
	}
}

// startProc starts a daemon and records its PID once it runs its own binary (nsenter, unshare
// and sh exec into it), so that teardown never signals a reused PID.
func (n *SecondaryRealNode) startProc(ctx context.Context, name, bin string, args ...string) error {
	path, err := exec.LookPath(bin)
	if err != nil {
		return fmt.Errorf("finding %s: %w", bin, err)
	}
	pid, err := StartDaemon(name, path, args, filepath.Join(n.Dir, "logs", name+".log"))
	if err != nil {
		return err
	}
	var exe string
	err = waitFor(ctx, 10*time.Second, name+" to start", func(context.Context) error {
		e, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil {
			return fmt.Errorf("process %d gone: %w", pid, err)
		}
		exe = strings.TrimSuffix(e, " (deleted)")
		if base := filepath.Base(exe); base != name && !strings.HasPrefix(base, name+"-v") { // kubelet-v1.34.4
			return fmt.Errorf("still %s", exe)
		}
		return nil
	})
	if err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return n.withLog(err, name)
	}
	n.state.Procs[name] = hostProc{PID: pid, Exe: exe}
	return n.state.save()
}

func (n *SecondaryRealNode) ctr(ctx context.Context, args ...string) (string, error) {
	run := n.runDir
	if run == "" {
		// A node described to another process of the suite (its exported fields only): its
		// containerd is where the process that made it put it.
		run = filepath.Join(netnsRunRoot, n.Cluster)
	}
	return (&realNodeState{RunDir: run}).ctr(ctx, args...)
}

// ImportImage imports a docker-save or OCI tarball into the node's containerd (namespace k8s.io),
// where its kubelet finds it. Pods use it with imagePullPolicy Never or IfNotPresent.
func (n *SecondaryRealNode) ImportImage(ctx context.Context, tarPath string) error {
	if _, err := n.ctr(ctx, "images", "import", tarPath); err != nil {
		return fmt.Errorf("importing %s into %s: %w", tarPath, n.Name, err)
	}
	return nil
}

// TagImage gives an image of the node's containerd a second name (namespace k8s.io), as a
// regional registry mirror serves the same image under its own: the kubelet runs either name.
func (n *SecondaryRealNode) TagImage(ctx context.Context, image, name string) error {
	if _, err := n.ctr(ctx, "images", "tag", "--force", image, name); err != nil {
		return fmt.Errorf("naming %s %s in %s: %w", image, name, n.Name, err)
	}
	return nil
}

// UntagImage removes a name TagImage gave (the image stays under its others).
func (n *SecondaryRealNode) UntagImage(ctx context.Context, name string) error {
	if _, err := n.ctr(ctx, "images", "rm", name); err != nil {
		return fmt.Errorf("removing the name %s in %s: %w", name, n.Name, err)
	}
	return nil
}

// join starts the kubelet and kube-proxy against the secondary, in the node's namespaces, and
// waits until the node is Ready and kube-proxy has written the rules of the `kubernetes` Service
// and of the cluster DNS.
func (n *SecondaryRealNode) join(ctx context.Context, c *Cluster, caFile string) error {
	start := time.Now()
	kubeconfig := filepath.Join(n.Dir, "kubeconfig")
	if err := n.writeKubeconfig(c.KubeconfigPath, kubeconfig); err != nil {
		return err
	}
	n.state.Kubeconfig = c.KubeconfigPath
	cfg := n.config(caFile, kubeconfig).withDNS(c)
	kubeletCfg, err := render(kubeletTmpl, cfg)
	if err != nil {
		return err
	}
	proxyCfg, err := render(kubeProxyTmpl, cfg)
	if err != nil {
		return err
	}
	if err := errors.Join(writeFile(filepath.Join(n.Dir, "kubelet", "config.yaml"), kubeletCfg),
		writeFile(filepath.Join(n.Dir, "kube-proxy", "config.yaml"), proxyCfg)); err != nil {
		return err
	}
	if err := n.startKubelet(ctx, c); err != nil {
		return err
	}
	ready := time.Since(start)
	if err := n.startKubeProxy(ctx, c); err != nil {
		return err
	}
	fmt.Fprintf(n.log, "testbed: real node %s Ready in %s (kube-proxy after %s), netns %s, node IP %s, pods %s\n",
		n.Name, ready.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond), n.Netns, n.NodeIP, n.PodCIDR)
	return nil
}

// startKubelet starts the kubelet of the configuration join wrote, in the node's namespaces, and
// waits until the node is Ready.
func (n *SecondaryRealNode) startKubelet(ctx context.Context, c *Cluster) error {
	holder := strconv.Itoa(n.state.Procs["containerd"].PID)
	err := n.startProc(ctx, "kubelet", "nsenter", "-t", holder, "-n", "-m", nodeBinary(n.toolsDir, "kubelet", c.KubeVersion),
		"--config", filepath.Join(n.Dir, "kubelet", "config.yaml"), "--kubeconfig", filepath.Join(n.Dir, "kubeconfig"),
		"--root-dir", filepath.Join(n.Dir, "kubelet", "root"), "--cert-dir", filepath.Join(n.Dir, "kubelet", "pki"),
		"--hostname-override", n.Name, "--node-ip", n.NodeIP, "--node-labels", RealNodeKey+"=true", "--v=2")
	if err != nil {
		return err
	}
	err = waitFor(ctx, 2*time.Minute, "node "+n.Name+" to be Ready", func(ctx context.Context) error {
		node, err := c.Clientset.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !NodeReady(node) {
			return errors.New("not Ready")
		}
		return nil
	})
	if err != nil {
		return n.withLog(err, "kubelet")
	}
	return nil
}

// startKubeProxy starts kube-proxy in the node's namespaces and waits until it has written the
// rules of the `kubernetes` Service and of the cluster DNS.
func (n *SecondaryRealNode) startKubeProxy(ctx context.Context, c *Cluster) error {
	holder := strconv.Itoa(n.state.Procs["containerd"].PID)
	if err := n.startProc(ctx, "kube-proxy", "nsenter", "-t", holder, "-n", "-m", nodeBinary(n.toolsDir, "kube-proxy", c.KubeVersion),
		"--config", filepath.Join(n.Dir, "kube-proxy", "config.yaml"), "--v=2"); err != nil {
		return err
	}
	err := waitFor(ctx, time.Minute, "kube-proxy's rules for the kubernetes and DNS Services", func(ctx context.Context) error {
		out, err := exec.CommandContext(ctx, "nsenter", "--net="+filepath.Join("/run/netns", n.Netns),
			"iptables", "-w", "-t", "nat", "-S", "KUBE-SERVICES").CombinedOutput()
		return missingServiceRules(string(out), err, c)
	})
	if err != nil {
		return n.withLog(err, "kube-proxy")
	}
	return nil
}

// stopAgents stops the node's kubelet and kube-proxy, leaving containerd and the containers
// running: the node of a stopped cluster, as a node whose kubelet restarts. Started again with
// the cluster (startAgents), they list and watch from scratch at once, where agents that lived
// through the outage would wait out client-go's reflector back-off (up to a minute) before they
// saw a deletion.
func (n *SecondaryRealNode) stopAgents() error {
	rs := &realNodeState{RunDir: n.runDir, Procs: n.state.Procs}
	return errors.Join(rs.stopProc("kubelet", 10*time.Second), rs.stopProc("kube-proxy", 5*time.Second))
}

// startAgents starts the kubelet and kube-proxy stopAgents stopped, and waits as join does.
func (n *SecondaryRealNode) startAgents(ctx context.Context, c *Cluster) error {
	if err := n.startKubelet(ctx, c); err != nil {
		return err
	}
	return n.startKubeProxy(ctx, c)
}

// writeKubeconfig writes the secondary's kubeconfig as seen from the node's network namespace:
// its API server at the host's end of the veth, which its certificate lacks, so the name checked
// is localhost's (N6).
func (n *SecondaryRealNode) writeKubeconfig(from, to string) error {
	cfg, err := clientcmd.LoadFromFile(from)
	if err != nil {
		return fmt.Errorf("reading %s: %w", from, err)
	}
	for _, cl := range cfg.Clusters {
		u, err := url.Parse(cl.Server)
		if err != nil {
			return fmt.Errorf("parsing the server of %s: %w", from, err)
		}
		u.Host = net.JoinHostPort(n.HostIP, u.Port())
		cl.Server = u.String()
		cl.TLSServerName = "localhost"
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(to), err)
	}
	if err := clientcmd.WriteToFile(*cfg, to); err != nil {
		return fmt.Errorf("writing %s: %w", to, err)
	}
	return nil
}

// PIDs are the node's processes that still run: containerd, kubelet, kube-proxy and the shims.
func (n *SecondaryRealNode) PIDs() []int {
	if n.state == nil {
		return nil
	}
	var pids []int
	for _, p := range n.state.Procs {
		if p.alive() {
			pids = append(pids, p.PID)
		}
	}
	return append(pids, (&realNodeState{RunDir: n.runDir}).shimPIDs()...)
}

// RSS is the resident memory of the node's processes (containerd, kubelet, kube-proxy, shims), in bytes.
func (n *SecondaryRealNode) RSS() int64 {
	var total int64
	for _, pid := range n.PIDs() {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				total += kb * 1024
			}
		}
	}
	return total
}

func (n *SecondaryRealNode) withLog(err error, component string) error {
	raw, _ := os.ReadFile(filepath.Join(n.Dir, "logs", component+".log"))
	return fmt.Errorf("%w\n%s log, last lines:\n%s", err, component, lastLines(string(raw), 15))
}
