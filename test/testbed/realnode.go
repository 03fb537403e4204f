package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-dev/flotilla/internal/ociimage"
)

// RealNode is the primary's one real node: containerd, runc and the CNI plugins from Debian, and
// a kubelet and kube-proxy v1.35.4, all running on this host as root. Pods scheduled there (they
// must tolerate the RealNodeKey taint) run as real containers from images imported with
// ImportImage; nothing is ever pulled.
type RealNode struct {
	// Name is the Node's name, RealNodeName.
	Name string
	// HostIP is the node's InternalIP, this host's address on its default route. Pods reach the
	// host there, and with it every API server of the bed (they listen on all addresses and their
	// certificates carry the host's IPs).
	HostIP string
	// GatewayIP is the pods' default gateway on the bridge, also this host.
	GatewayIP string
	// PodCIDR is the pods' range, one that overlaps none of the host's networks.
	PodCIDR string
	// ServiceCIDR is the primary's Service range (its kube-apiserver's --service-cluster-ip-range).
	ServiceCIDR string
	// KubernetesServiceIP is the `kubernetes` Service's ClusterIP, in the API server's certificate.
	KubernetesServiceIP string
	// Dir holds the node's configuration, state and logs (logs/ outlives the teardown).
	Dir string

	toolsDir string
	state    *realNodeState
	log      io.Writer
}

// realNodeRequirements are the host programs the real node runs (Debian packages, see make tools).
var realNodeRequirements = []string{
	"containerd", "containerd-shim-runc-v2", "ctr", "runc", "ip", "conntrack",
	"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore",
}

var realNodeCNIPlugins = []string{"bridge", "host-local", "portmap", "loopback"}

// realNodeCgroups are the cgroup v1 controllers the kubelet needs.
var realNodeCgroups = []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "freezer"}

// RealNodeAvailable says why this host cannot run the bed's real node, or nil when it can. The
// tools are looked up as Options.ToolsDir's default does ($FLOTILLA_TOOLS_DIR, else install.sh).
func RealNodeAvailable() error { return RealNodeAvailableIn("") }

// RealNodeAvailableIn is RealNodeAvailable with the tools in toolsDir ("" for the default).
func RealNodeAvailableIn(toolsDir string) error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("real node: needs Linux, not %s", runtime.GOOS)
	}
	var why []error
	if os.Geteuid() != 0 {
		why = append(why, errors.New("not root: containerd, the kubelet and iptables need root"))
	} else if err := checkCapabilities(); err != nil {
		why = append(why, err)
	}
	why = append(why, checkHostPrograms(), checkRealNodeTools(toolsDir), checkCgroups(), checkOverlay(), checkHostFree())
	if os.Geteuid() == 0 {
		why = append(why, checkForeignChains())
	}
	if !realNodeClaimed() {
		why = append(why, checkPorts())
	}
	if err := errors.Join(why...); err != nil {
		return fmt.Errorf("real node unavailable: %w", err)
	}
	return nil
}

// checkCapabilities wants CAP_NET_ADMIN (bridge, veths, iptables) and CAP_SYS_ADMIN (mounts,
// namespaces). CAP_SYS_RESOURCE is not needed: containerd runs with restrict_oom_score_adj (G1).
func checkCapabilities() error {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("reading capabilities: %w", err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		hex, ok := strings.CutPrefix(line, "CapEff:")
		if !ok {
			continue
		}
		caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			return fmt.Errorf("parsing CapEff %q: %w", hex, err)
		}
		const capNetAdmin, capSysAdmin = 12, 21
		var missing []string
		if caps&(1<<capNetAdmin) == 0 {
			missing = append(missing, "CAP_NET_ADMIN")
		}
		if caps&(1<<capSysAdmin) == 0 {
			missing = append(missing, "CAP_SYS_ADMIN")
		}
		if len(missing) > 0 {
			return fmt.Errorf("root lacks %s (a container without them cannot run a node)", strings.Join(missing, " and "))
		}
		return nil
	}
	return errors.New("no CapEff in /proc/self/status")
}

func checkHostPrograms() error {
	var missing []string
	for _, p := range realNodeRequirements {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	for _, p := range realNodeCNIPlugins {
		if _, err := os.Stat(filepath.Join(realNodeCNIDir, p)); err != nil {
			missing = append(missing, filepath.Join(realNodeCNIDir, p))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s: as root, `make tools` installs Debian's containerd, runc, containernetworking-plugins, conntrack and iptables",
			strings.Join(missing, ", "))
	}
	return nil
}

func checkRealNodeTools(toolsDir string) error {
	dir, err := ToolsDir(toolsDir)
	if err != nil {
		return err
	}
	// Every cluster with a real node has its CoreDNS (dns.go).
	coredns, err := corednsBinary(dir)
	if err != nil {
		return err
	}
	for _, b := range []string{filepath.Join(dir, "kubelet"), filepath.Join(dir, "kube-proxy"), coredns} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("no %s in %s: run `make tools`", filepath.Base(b), dir)
		}
	}
	return nil
}

// checkCgroups wants the controllers the kubelet needs, writable, and no other kubelet's pods.
func checkCgroups() error {
	if len(kubepodsDirs()) > 0 && !realNodeClaimed() {
		return fmt.Errorf("cgroups %v exist: another kubelet runs on this host", kubepodsDirs())
	}
	if raw, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		// cgroup v2 only
		have := strings.Fields(string(raw))
		for _, c := range []string{"cpu", "memory", "pids"} {
			if !strings.Contains(" "+strings.Join(have, " ")+" ", " "+c+" ") {
				return fmt.Errorf("cgroup v2 controller %s not enabled at /sys/fs/cgroup", c)
			}
		}
		return writable("/sys/fs/cgroup")
	}
	for _, c := range realNodeCgroups {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c)); err != nil {
			return fmt.Errorf("cgroup v1 controller %s not mounted under /sys/fs/cgroup", c)
		}
	}
	return writable("/sys/fs/cgroup/memory")
}

func writable(dir string) error {
	if err := syscall.Access(dir, 2 /* W_OK */); err != nil {
		return fmt.Errorf("cgroup %s is not writable (read-only cgroupfs in a container?): %w", dir, err)
	}
	return nil
}

func checkOverlay() error {
	raw, err := os.ReadFile("/proc/filesystems")
	if err != nil {
		return fmt.Errorf("reading /proc/filesystems: %w", err)
	}
	if !strings.Contains(string(raw), "\toverlay\n") {
		return errors.New("the kernel has no overlay filesystem (containerd's snapshotter): modprobe overlay")
	}
	return nil
}

// checkHostFree refuses a host whose real node is in use by a running bed: the bridge, pod
// range, ports and host paths are host-global. A claim whose processes are all gone is stale
// (a crashed run) and is cleaned up by the next bring-up.
func checkHostFree() error {
	owner, err := realNodeOwner()
	if err != nil || owner == "" {
		return err
	}
	st, err := loadRealNodeState(owner)
	if err != nil {
		return err
	}
	if st != nil && st.anyAlive() {
		return fmt.Errorf("the real node of the bed in %s runs on this host (one per host): stop that bed first", filepath.Dir(owner))
	}
	return nil
}

// checkPorts wants the kubelet's and kube-proxy's fixed ports free.
func checkPorts() error {
	var busy []string
	for _, port := range []int{kubeletPort, kubeletHealthz, kubeProxyHealthz, kubeProxyMetrics} {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			busy = append(busy, strconv.Itoa(port))
			continue
		}
		_ = l.Close()
	}
	if len(busy) > 0 {
		return fmt.Errorf("ports %s are in use (the kubelet's and kube-proxy's)", strings.Join(busy, ", "))
	}
	return nil
}

// checkForeignChains refuses a host with KUBE-* or CNI-* iptables chains that no real node of
// ours left: a kube-proxy or kubelet of someone else's runs here, and teardown would remove them.
func checkForeignChains() error {
	if realNodeClaimed() {
		return nil // a crashed run of ours left them; the next bring-up removes them
	}
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(tool).Output()
		if err != nil {
			continue // a missing tool is reported by checkHostPrograms
		}
		if _, dropped := filterChains(out); dropped > 0 {
			return fmt.Errorf("%s shows KUBE-* or CNI-* chains: another kubelet, kube-proxy or CNI user runs on this host", tool)
		}
	}
	return nil
}

func realNodeClaimed() bool {
	owner, _ := realNodeOwner()
	return owner != ""
}

// realNodeOwner is the node dir of the bed that claimed this host, "" when none did.
func realNodeOwner() (string, error) {
	raw, err := os.ReadFile(filepath.Join(realNodeRunDir, "owner"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the real node's owner: %w", err)
	}
	return strings.TrimSpace(string(raw)), nil
}

// planRealNode picks the node's addresses and ranges; it changes nothing on the host.
func planRealNode(workDir, toolsDir string, log io.Writer) (*RealNode, error) {
	ip, err := HostIP()
	if err != nil {
		return nil, err
	}
	taken, err := hostNetworks()
	if err != nil {
		return nil, err
	}
	pods, err := pickCIDR(podCIDRCandidates, taken)
	if err != nil {
		return nil, fmt.Errorf("pod range: %w", err)
	}
	svc, err := pickCIDR(serviceCIDRCandidates, append(taken, pods))
	if err != nil {
		return nil, fmt.Errorf("service range: %w", err)
	}
	return &RealNode{
		Name:                RealNodeName,
		HostIP:              ip.String(),
		GatewayIP:           nthIP(pods, 1).String(),
		PodCIDR:             pods.String(),
		ServiceCIDR:         svc.String(),
		KubernetesServiceIP: nthIP(svc, 1).String(),
		Dir:                 filepath.Join(workDir, "realnode"),
		toolsDir:            toolsDir,
		log:                 log,
	}, nil
}

// kwokctlArgs are the primary's kwokctl flags for the real node: the certificate SAN of the
// `kubernetes` Service IP (G2), the Service range, the address type the API server dials the
// kubelet at (its Hostname does not resolve, G4; the virtual nodes' InternalIP stays first as
// before). Webhooks and aggregated APIs are reached at their endpoints (G5) in every cluster of the
// bed (createCluster).
func (n *RealNode) kwokctlArgs() (args, extra []string) {
	return []string{"--config", filepath.Join(n.Dir, "kwokctl.yaml")}, []string{
		"kube-apiserver=service-cluster-ip-range=" + n.ServiceCIDR,
		"kube-apiserver=kubelet-preferred-address-types=InternalIP,Hostname,InternalDNS,ExternalDNS,ExternalIP",
	}
}

func (n *RealNode) config(caFile, kubeconfig string) realNodeConfig {
	return realNodeConfig{
		Dir: n.Dir, RunDir: realNodeRunDir, PodCIDR: n.PodCIDR, Gateway: n.GatewayIP, Bridge: realNodeBridge,
		CNIBinDir: realNodeCNIDir, ClientCAFile: caFile, Kubeconfig: kubeconfig,
		PodLogsDir: filepath.Join(n.Dir, "pod-logs"), Taint: RealNodeKey, Name: n.Name,
		KubeletPort: kubeletPort, KubeletHealthz: kubeletHealthz,
		KubeProxyHealthz: kubeProxyHealthz, KubeProxyMetrics: kubeProxyMetrics, LeaseDurationSecs: realNodeLeaseSecs,
	}
}

// prepareFiles writes what the primary's kwokctl reads; it changes nothing on the host.
func (n *RealNode) prepareFiles() error {
	return writeFile(filepath.Join(n.Dir, "kwokctl.yaml"), kwokctlConfig(net.ParseIP(n.KubernetesServiceIP)))
}

// prepare claims the host, records what bring-up will change, starts containerd and imports the
// pause image. It runs while the clusters start.
func (n *RealNode) prepare(ctx context.Context) error {
	start := time.Now()
	if n.state == nil {
		if err := n.claimHost(ctx); err != nil {
			return err
		}
	}
	cfg := n.config("", "")
	if err := writeRuntimeConfig(n.Dir, cfg); err != nil {
		return err
	}
	bin, err := exec.LookPath("containerd")
	if err != nil {
		return fmt.Errorf("finding containerd: %w", err)
	}
	if err := n.startProc("containerd", bin, "--config", filepath.Join(n.Dir, "containerd", "config.toml")); err != nil {
		return err
	}
	err = waitFor(ctx, 30*time.Second, "containerd to answer", func(ctx context.Context) error {
		_, err := n.state.ctr(ctx, "version")
		return err
	})
	if err != nil {
		return n.withLog(err, "containerd")
	}
	if err := n.importPause(ctx); err != nil {
		return err
	}
	fmt.Fprintf(n.log, "testbed: real node: containerd up, pause image imported in %s\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// claimHost takes the host's one real node slot, cleaning up after a crashed bed whose slot it
// was, and saves the host's state before anything changes it. Two beds claiming at once, or one
// claiming while another tears down, take turns (lockHost).
func (n *RealNode) claimHost(ctx context.Context) error {
	unlock, err := lockHost(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := checkHostFree(); err != nil {
		return err
	}
	if err := releaseStaleClaim(ctx, n.log); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(n.Dir, "logs"), 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", n.Dir, err)
	}
	// The run dir is the claim: only a state that made it may remove it.
	if err := os.Mkdir(realNodeRunDir, 0o700); err != nil {
		return fmt.Errorf("claiming the host's real node (%s): %w", realNodeRunDir, err)
	}
	n.state = &realNodeState{
		Dir: n.Dir, RunDir: realNodeRunDir, Bridge: realNodeBridge,
		KubeProxy: filepath.Join(n.toolsDir, "kube-proxy"), Procs: map[string]hostProc{},
	}
	if err := snapshotHost(n.state); err != nil {
		return err
	}
	// The state is on disk before the host changes: a crash from here on is undone by `down`.
	if err := n.state.save(); err != nil {
		return err
	}
	return writeFile(filepath.Join(realNodeRunDir, "owner"), []byte(n.Dir+"\n"))
}

// lockHost serialises the claims and teardowns of real nodes on this host with a lock on /run
// (a lock file of its own would be one more host path to clean up).
func lockHost(ctx context.Context) (func(), error) {
	f, err := os.Open("/run")
	if err != nil {
		return nil, fmt.Errorf("opening /run to lock it: %w", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("waiting for the host's real node lock (/run): %w", err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
}

// releaseStaleClaim undoes what a crashed bed's real node left on this host (checkHostFree made
// sure none of its processes runs), from the state that bed saved.
func releaseStaleClaim(ctx context.Context, log io.Writer) error {
	owner, err := realNodeOwner()
	if err != nil {
		return err
	}
	if owner != "" {
		st, err := loadRealNodeState(owner)
		if err != nil {
			return err
		}
		if st == nil {
			// Its work dir is gone (removed by a test run whose teardown failed?): what is
			// host-global can still be cleaned up, only the sysctls and host paths cannot.
			st = &realNodeState{Dir: owner, RunDir: realNodeRunDir, Bridge: realNodeBridge, Procs: procsOf(owner)}
			fmt.Fprintf(log, "testbed: the crashed real node of %s left no state: its sysctls and host paths cannot be restored\n", owner)
		}
		if err := st.teardown(ctx, log); err != nil {
			return fmt.Errorf("cleaning up after the crashed real node of %s: %w", owner, err)
		}
	}
	// A run dir without an owner, or whose owner's state is gone, is claimed by nobody.
	if _, err := os.Stat(realNodeRunDir); err == nil {
		if err := unmountUnder(realNodeRunDir); err != nil {
			return err
		}
		if err := os.RemoveAll(realNodeRunDir); err != nil {
			return fmt.Errorf("removing the stale %s: %w", realNodeRunDir, err)
		}
	}
	return nil
}

// procsOf finds the real node processes whose configuration is under dir, by their command lines.
func procsOf(dir string) map[string]hostProc {
	procs := map[string]hostProc{}
	files, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(raw), "\x00"+dir+"/") {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join(filepath.Dir(f), "exe"))
		if err != nil {
			continue
		}
		for _, name := range []string{"containerd", "kubelet", "kube-proxy"} {
			if filepath.Base(strings.TrimSuffix(exe, " (deleted)")) == name {
				procs[name] = hostProc{PID: pid, Exe: strings.TrimSuffix(exe, " (deleted)")}
			}
		}
	}
	return procs
}

// startProc starts a host process detached from this one (its own session, no parent-death
// signal), so that the bed outlives `flotilla-testbed up` as kwokctl's processes do, and records
// its PID.
func (n *RealNode) startProc(name, bin string, args ...string) error {
	pid, err := StartDaemon(name, bin, args, filepath.Join(n.Dir, "logs", name+".log"))
	if err != nil {
		return err
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		exe = bin
	}
	n.state.Procs[name] = hostProc{PID: pid, Exe: exe}
	return n.state.save()
}

// importPause builds test/testbed/pause, static, into the sandbox image and imports it.
func (n *RealNode) importPause(ctx context.Context) error {
	tar, err := buildPauseImage(ctx, filepath.Join(n.Dir, "images"))
	if err != nil {
		return err
	}
	return n.ImportImage(ctx, tar)
}

// buildPauseImage builds test/testbed/pause, static, into the sandbox image PauseImage, a
// tarball in dir, and returns its path.
func buildPauseImage(ctx context.Context, dir string) (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("locating test/testbed/pause")
	}
	bin := filepath.Join(dir, "pause")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./pause")
	build.Dir = filepath.Dir(file)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the pause program: %w: %s", err, out)
	}
	platform := "linux/" + runtime.GOARCH
	tar := filepath.Join(dir, "pause.tar")
	spec := ociimage.Spec{Ref: PauseImage, Entrypoint: "/pause", User: "65535:65535", Binaries: map[string]string{platform: bin}}
	if err := ociimage.WriteTarball(spec, platform, tar); err != nil {
		return "", fmt.Errorf("writing the pause image: %w", err)
	}
	return tar, nil
}

// ImportImage imports a docker-save or OCI tarball into containerd's k8s.io namespace, where the
// kubelet finds it. Pods use it with imagePullPolicy Never or IfNotPresent.
func (n *RealNode) ImportImage(ctx context.Context, tarPath string) error {
	if _, err := n.state.ctr(ctx, "images", "import", tarPath); err != nil {
		return fmt.Errorf("importing %s into the real node: %w", tarPath, err)
	}
	return nil
}

// join starts the kubelet and kube-proxy against the primary, once it runs, and waits until the
// node is Ready and kube-proxy has written the rules of the `kubernetes` Service and of the
// cluster DNS: a pod dialling their ClusterIPs earlier would leave the host by the default route (G3).
func (n *RealNode) join(ctx context.Context, primary *Cluster, caFile string) error {
	start := time.Now()
	n.state.Kubeconfig = primary.KubeconfigPath
	cfg := n.config(caFile, primary.KubeconfigPath).withDNS(primary)
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
	err = n.startProc("kubelet", nodeBinary(n.toolsDir, "kubelet", primary.KubeVersion),
		"--config", filepath.Join(n.Dir, "kubelet", "config.yaml"), "--kubeconfig", primary.KubeconfigPath,
		"--root-dir", filepath.Join(n.Dir, "kubelet", "root"), "--cert-dir", filepath.Join(n.Dir, "kubelet", "pki"),
		"--hostname-override", n.Name, "--node-ip", n.HostIP, "--node-labels", RealNodeKey+"=true", "--v=2")
	if err != nil {
		return err
	}
	err = waitFor(ctx, 2*time.Minute, "node "+n.Name+" to be Ready", func(ctx context.Context) error {
		node, err := primary.Clientset.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
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
	if err := n.startProc("kube-proxy", nodeBinary(n.toolsDir, "kube-proxy", primary.KubeVersion),
		"--config", filepath.Join(n.Dir, "kube-proxy", "config.yaml"), "--v=2"); err != nil {
		return err
	}
	err = waitFor(ctx, time.Minute, "kube-proxy's rules for the kubernetes and DNS Services", func(ctx context.Context) error {
		out, err := exec.CommandContext(ctx, "iptables", "-w", "-t", "nat", "-S", "KUBE-SERVICES").CombinedOutput()
		return missingServiceRules(string(out), err, primary)
	})
	if err != nil {
		return n.withLog(err, "kube-proxy")
	}
	fmt.Fprintf(n.log, "testbed: real node %s Ready (kubelet, kube-proxy) in %s, pods %s, Services %s\n",
		n.Name, time.Since(start).Round(100*time.Millisecond), n.PodCIDR, n.ServiceCIDR)
	return nil
}

// missingServiceRules says which Service a node's KUBE-SERVICES chain (out, as iptables -S
// printed it, or err) does not route yet: the `kubernetes` Service and, when the cluster has one,
// its DNS. A pod dialling either earlier would leave by the default route (G3).
func missingServiceRules(out string, err error, c *Cluster) error {
	if err != nil {
		return fmt.Errorf("listing KUBE-SERVICES: %w", err)
	}
	wants := []string{"default/kubernetes:https"}
	if c.DNSServiceIP != "" {
		wants = append(wants, metav1.NamespaceSystem+"/"+DNSServiceName+":dns")
	}
	for _, w := range wants {
		if !strings.Contains(out, w) {
			return fmt.Errorf("no rule for %s yet", w)
		}
	}
	return nil
}

// PIDs are the node's processes that still run: containerd, kubelet, kube-proxy and the shims.
func (n *RealNode) PIDs() []int {
	if n.state == nil {
		return nil
	}
	var pids []int
	for _, p := range n.state.Procs {
		if p.alive() {
			pids = append(pids, p.PID)
		}
	}
	return append(pids, n.state.shimPIDs()...)
}

// stop tears the node down and restores the host; see realNodeState.teardown.
func (n *RealNode) stop(ctx context.Context) error {
	return stopRealNodeDir(ctx, n.Dir, n.log)
}

// stopRealNodeDir tears down the real node whose state is in dir, if any, and releases the host.
// The host is restored even when ctx is done already (a test's context is cancelled before its
// cleanups run): every step has a deadline of its own.
func stopRealNodeDir(ctx context.Context, dir string, log io.Writer) error {
	ctx = context.WithoutCancel(ctx)
	st, err := loadRealNodeState(dir)
	if err != nil || st == nil {
		return err
	}
	unlock, err := lockHost(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return st.teardown(ctx, log)
}

func (n *RealNode) withLog(err error, component string) error {
	raw, _ := os.ReadFile(filepath.Join(n.Dir, "logs", component+".log"))
	return fmt.Errorf("%w\n%s log, last lines:\n%s", err, component, lastLines(string(raw), 15))
}

func waitFor(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = check(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w (last: %w)", what, err, last)
	}
	return nil
}

func writeFile(path string, raw []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// writeRuntimeConfig writes a real node's containerd configuration and CNI network list from cfg
// into its dir.
func writeRuntimeConfig(dir string, cfg realNodeConfig) error {
	for _, f := range []struct {
		path string
		tmpl *template.Template
	}{
		{filepath.Join(dir, "containerd", "config.toml"), containerdTmpl},
		{filepath.Join(dir, "cni", "net.d", "10-realnode.conflist"), cniTmpl},
	} {
		raw, err := render(f.tmpl, cfg)
		if err != nil {
			return err
		}
		if err := writeFile(f.path, raw); err != nil {
			return err
		}
	}
	return nil
}
