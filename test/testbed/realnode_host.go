package testbed

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// realNodeSysctls are what the kubelet (G7: overcommit, panic, keys), the bridge plugin (forwarding)
// and kube-proxy (route_localnet, conntrack, if its config did not stop it) may change on the host.
// Their values before bring-up are saved and written back at teardown.
var realNodeSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
	"net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding", "net/ipv4/conf/all/route_localnet",
	"net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables",
	"net/netfilter/nf_conntrack_max", "net/netfilter/nf_conntrack_tcp_timeout_established",
	"net/netfilter/nf_conntrack_tcp_timeout_close_wait",
}

// realNodeHostPaths are written by the kubelet, containerd and libcni whatever their configuration
// says (G8). Those that did not exist before bring-up are removed at teardown.
var realNodeHostPaths = []string{
	"/var/lib/kubelet", "/var/lib/cni", "/var/log/pods", "/var/log/containers", "/run/containerd",
	"/run/netns", "/opt/containerd", "/var/lib/containerd", "/etc/kubernetes", "/var/lib/kube-proxy",
	"/run/mount", // libmount's, when the kubelet runs mount(8) for a pod's volumes
}

// chainPattern matches the iptables lines of the kubelet, kube-proxy and the CNI plugins.
var chainPattern = regexp.MustCompile(`KUBE-|CNI-`)

// realNodeState is what teardown needs, written to the node's dir before the host is changed and
// after each process starts, so that a later `down` restores the host after a crashed run.
type realNodeState struct {
	Dir        string              `json:"dir"`
	RunDir     string              `json:"runDir"`
	Kubeconfig string              `json:"kubeconfig,omitempty"` // the primary's: pods are deleted through it
	KubeProxy  string              `json:"kubeProxy"`            // binary, for --cleanup
	Procs      map[string]hostProc `json:"procs"`
	Sysctls    map[string]string   `json:"sysctls"`  // /proc/sys path -> value before bring-up
	NewPaths   []string            `json:"newPaths"` // host paths absent before bring-up
	Netns      []string            `json:"netns"`    // /run/netns entries before bring-up (kept)
	Nfacct     []string            `json:"nfacct"`   // kube-proxy's accounting objects that existed before (kept)
	Bridge     string              `json:"bridge"`
}

// hostProc is a process the real node started, with its binary, so that a PID reused since a
// crash is never signalled.
type hostProc struct {
	PID int    `json:"pid"`
	Exe string `json:"exe"`
}

const realNodeStateFile = "state.json"

func (s *realNodeState) save() error {
	raw, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the real node's state: %w", err)
	}
	path := filepath.Join(s.Dir, realNodeStateFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// loadRealNodeState reads a node dir's state; nil without error when there is none.
func loadRealNodeState(dir string) (*realNodeState, error) {
	raw, err := os.ReadFile(filepath.Join(dir, realNodeStateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the real node's state: %w", err)
	}
	var s realNodeState
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", filepath.Join(dir, realNodeStateFile), err)
	}
	return &s, nil
}

// snapshotHost records what bring-up will change: sysctls, absent host paths, existing netns.
func snapshotHost(s *realNodeState) error {
	s.Sysctls = map[string]string{}
	for _, k := range realNodeSysctls {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			s.Sysctls[k] = strings.TrimSpace(string(v))
		}
	}
	for _, p := range realNodeHostPaths {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			s.NewPaths = append(s.NewPaths, p)
		}
	}
	entries, err := os.ReadDir("/run/netns")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("listing /run/netns: %w", err)
	}
	for _, e := range entries {
		s.Netns = append(s.Netns, e.Name())
	}
	for _, name := range kubeProxyNfacct {
		ok, err := nfacctExists(name)
		if err != nil {
			return fmt.Errorf("looking up nfacct object %s: %w", name, err)
		}
		if ok {
			s.Nfacct = append(s.Nfacct, name)
		}
	}
	return nil
}

// alive says whether the process is still the one the state recorded.
func (p hostProc) alive() bool {
	if p.PID <= 1 || !processAlive(p.PID) {
		return false
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.PID))
	return err == nil && strings.TrimSuffix(exe, " (deleted)") == p.Exe
}

func (s *realNodeState) anyAlive() bool {
	for _, p := range s.Procs {
		if p.alive() {
			return true
		}
	}
	return false
}

func (s *realNodeState) stopProc(name string, grace time.Duration) error {
	p, ok := s.Procs[name]
	if !ok || !p.alive() {
		return nil
	}
	if left := killAndWait([]int{p.PID}, grace); len(left) > 0 {
		return fmt.Errorf("%s (pid %d) still running after SIGKILL", name, p.PID)
	}
	return nil
}

// teardownStep is one part of the teardown; every step runs even when an earlier one failed.
// A host step changes what is host-global (the run dir, bridge, chains, sysctls, cgroups).
type teardownStep struct {
	name string
	host bool
	fn   func(context.Context) error
}

// teardown stops everything the real node started and puts the host back as snapshotHost found
// it. It works from the saved state alone, so it also cleans up after a crashed run. The state
// file is removed only when every step succeeded, so that a failed teardown can be retried.
//
// The host steps run only while the run dir still names this node as its owner: without it the
// host was restored already (the run dir goes last) or rebooted, and with another owner it is
// that bed's now. Either way this state's snapshot no longer describes the host.
func (s *realNodeState) teardown(ctx context.Context, log io.Writer) error {
	start := time.Now()
	owner, err := realNodeOwner()
	if err != nil {
		return err
	}
	owned := owner == s.Dir
	steps := []teardownStep{
		{"deleting its pods while the kubelet runs (G10)", false, s.deletePods},
		{"stopping kubelet and kube-proxy", false, func(context.Context) error {
			return errors.Join(s.stopProc("kubelet", 10*time.Second), s.stopProc("kube-proxy", 5*time.Second))
		}},
		{"kube-proxy --cleanup", true, s.kubeProxyCleanup},
		{"killing leftover containers", true, s.killTasks},
		{"stopping containerd", false, func(context.Context) error { return s.stopProc("containerd", 10*time.Second) }},
		{"killing leftover container processes and shims", true, func(context.Context) error { return s.killLeftovers() }},
		{"removing the pod network", true, s.removeNetwork},
		{"removing iptables chains KUBE-* and CNI-*", true, purgeChains},
		{"removing kube-proxy's nfacct objects", true, func(context.Context) error { return s.removeNfacct() }},
		{"restoring sysctls", true, func(context.Context) error { return s.restoreSysctls() }},
		{"removing cgroups", true, func(context.Context) error { return removeKubepodsCgroups() }},
		{"removing mounts and host paths", true, func(context.Context) error { return s.removeHostPaths() }},
		{"removing the node's containerd and kubelet state", false, func(context.Context) error { return s.removeOwnPaths() }},
	}
	var errs []error
	for _, st := range steps {
		if st.host && !owned {
			continue
		}
		if err := st.fn(ctx); err != nil {
			errs = append(errs, fmt.Errorf("real node teardown, %s: %w", st.name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// The run dir goes last and only after every step succeeded: it is the claim, and its
	// absence tells a later teardown that the host was restored.
	if owned {
		if err := removeUnmounted([]string{s.RunDir}); err != nil {
			return fmt.Errorf("real node teardown, releasing the host: %w", err)
		}
	}
	if err := os.Remove(filepath.Join(s.Dir, realNodeStateFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the real node's state: %w", err)
	}
	if !owned {
		fmt.Fprintf(log, "testbed: real node stopped in %s (the host was restored before, or is another bed's now)\n",
			time.Since(start).Round(100*time.Millisecond))
		return nil
	}
	fmt.Fprintf(log, "testbed: real node stopped and host restored in %s\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// deletePods deletes the real node's pods while its kubelet runs: a kubelet stopped first leaves
// its containers running, their netns and volumes mounted (G10).
func (s *realNodeState) deletePods(ctx context.Context) error {
	if s.Kubeconfig == "" || !s.Procs["kubelet"].alive() {
		return nil
	}
	return deleteNodePods(ctx, s.Kubeconfig, RealNodeName)
}

// deleteNodePods cordons a node, so that its pods' controllers put their replacements elsewhere,
// deletes its pods and waits until the kubelet has removed them (containers stopped, network torn
// down). A cluster that no longer answers is not an error: the later steps kill the containers.
func deleteNodePods(ctx context.Context, kubeconfig, node string) error {
	cs, err := realNodeClient(kubeconfig)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	_, err = cs.CoreV1().Nodes().Patch(cctx, node, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
	if err != nil {
		// Not found, or the cluster is gone already (a normal state at teardown): nothing to
		// delete through it.
		return nil
	}
	sel := metav1.ListOptions{FieldSelector: "spec.nodeName=" + node}
	pods, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(cctx, sel)
	if err != nil {
		return fmt.Errorf("listing the pods of %s: %w", node, err)
	}
	grace := int64(2)
	for _, p := range pods.Items {
		err := cs.CoreV1().Pods(p.Namespace).Delete(cctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	// The kubelet removes a pod object once its containers are stopped and its network torn down.
	var left []corev1.Pod
	err = wait.PollUntilContextCancel(cctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		l, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, sel)
		if err != nil {
			return false, nil
		}
		left = l.Items
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d pods still on %s (the next steps kill them): %w", len(left), node, err)
	}
	return nil
}

func realNodeClient(kubeconfig string) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	rc.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("building a client from %s: %w", kubeconfig, err)
	}
	return cs, nil
}

// kubeProxyCleanup removes kube-proxy's rules (iptables, and nftables where it made any).
func (s *realNodeState) kubeProxyCleanup(ctx context.Context) error {
	if s.KubeProxy == "" {
		return nil
	}
	if _, err := os.Stat(s.KubeProxy); errors.Is(err, fs.ErrNotExist) {
		return nil // no binary: purgeChains removes its chains all the same
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// It exits non-zero when a mode it also cleans (nftables, ipvs) is unavailable here, so its
	// exit status says nothing about its iptables rules: purgeChains checks those.
	out, _ := exec.CommandContext(cctx, s.KubeProxy, "--cleanup", "--v=2").CombinedOutput()
	_ = os.WriteFile(filepath.Join(s.Dir, "logs", "kube-proxy-cleanup.log"), out, 0o600)
	return nil
}

func (s *realNodeState) ctr(ctx context.Context, args ...string) (string, error) {
	full := append([]string{"-a", filepath.Join(s.RunDir, "containerd.sock"), "-n", "k8s.io"}, args...)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, "ctr", full...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, lastLines(string(out), 5))
	}
	return string(out), nil
}

// killTasks kills and removes the containers the kubelet left, while containerd still runs.
func (s *realNodeState) killTasks(ctx context.Context) error {
	if !s.Procs["containerd"].alive() {
		return nil
	}
	out, err := s.ctr(ctx, "tasks", "ls", "-q")
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range strings.Fields(out) {
		_, _ = s.ctr(ctx, "tasks", "kill", "-a", "-s", "SIGKILL", id)
		if _, err := s.ctr(ctx, "tasks", "rm", "-f", id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killLeftovers kills what survives containerd: processes in the kubelet's cgroups (a container
// outlives its shim) and shims serving this node's containerd.
func (s *realNodeState) killLeftovers() error {
	pids := kubepodsPIDs()
	pids = append(pids, s.shimPIDs()...)
	if left := killAndWait(pids, 2*time.Second); len(left) > 0 {
		return fmt.Errorf("processes %v still running after SIGKILL", left)
	}
	return nil
}

func (s *realNodeState) shimPIDs() []int {
	sock := filepath.Join(s.RunDir, "containerd.sock")
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, f := range procs {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		if len(args) == 0 || !strings.Contains(filepath.Base(args[0]), "containerd-shim") || !slices.Contains(args, sock) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// kubepodsDirs are the kubelet's cgroup trees, one per hierarchy (cgroup v1) or the one (v2).
func kubepodsDirs() []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if _, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil {
		dirs = append(dirs, "/sys/fs/cgroup/kubepods")
	}
	return dirs
}

func kubepodsPIDs() []int {
	seen := map[int]bool{}
	var pids []int
	for _, root := range kubepodsDirs() {
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			// A cgroup removed while walking (err) is fine: its tasks are gone.
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			raw, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(raw)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 1 && !seen[pid] {
					seen[pid] = true
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// removeKubepodsCgroups removes the kubelet's cgroup trees, deepest first; RealNodeAvailable
// refuses a host where they existed before.
func removeKubepodsCgroups() error {
	var errs []error
	for _, root := range kubepodsDirs() {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			// A cgroup whose last task was just killed may refuse for a moment.
			var err error
			for range 20 {
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, fs.ErrNotExist) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// removeNetwork removes the pod network namespaces this run created and the bridge.
func (s *realNodeState) removeNetwork(context.Context) error {
	var errs []error
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if slices.Contains(s.Netns, e.Name()) || !strings.HasPrefix(e.Name(), "cni-") {
			continue
		}
		p := filepath.Join("/run/netns", e.Name())
		if err := unmountUnder(p); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Remove(p); err != nil {
			errs = append(errs, fmt.Errorf("removing netns %s: %w", p, err))
		}
	}
	if s.Bridge != "" {
		if _, err := os.Stat(filepath.Join("/sys/class/net", s.Bridge)); err == nil {
			if out, err := exec.Command("ip", "link", "del", s.Bridge).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("ip link del %s: %w: %s", s.Bridge, err, out))
			}
		}
	}
	return errors.Join(errs...)
}

// purgeChains removes every rule and chain of the kubelet, kube-proxy and the CNI plugins, for
// IPv4 and IPv6, and leaves every other rule as it is.
func purgeChains(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var errs []error
	for _, tool := range []string{"iptables", "ip6tables"} {
		if _, err := exec.LookPath(tool + "-save"); err != nil {
			continue
		}
		out, err := exec.CommandContext(ctx, tool+"-save").Output()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s-save: %w", tool, err))
			continue
		}
		kept, dropped := filterChains(out)
		if dropped == 0 {
			continue
		}
		restore := exec.CommandContext(ctx, tool+"-restore")
		restore.Stdin = bytes.NewReader(kept)
		if msg, err := restore.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("%s-restore: %w: %s", tool, err, msg))
		}
	}
	return errors.Join(errs...)
}

// filterChains drops the lines of an iptables-save dump that declare or use KUBE-*/CNI-* chains.
func filterChains(dump []byte) ([]byte, int) {
	var kept bytes.Buffer
	dropped := 0
	sc := bufio.NewScanner(bytes.NewReader(dump))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if chainPattern.MatchString(sc.Text()) {
			dropped++
			continue
		}
		kept.WriteString(sc.Text())
		kept.WriteByte('\n')
	}
	return kept.Bytes(), dropped
}

func (s *realNodeState) removeNfacct() error {
	var errs []error
	for _, name := range kubeProxyNfacct {
		if !slices.Contains(s.Nfacct, name) {
			errs = append(errs, nfacctDelete(name))
		}
	}
	return errors.Join(errs...)
}

func (s *realNodeState) restoreSysctls() error {
	var errs []error
	for k, v := range s.Sysctls {
		p := filepath.Join("/proc/sys", k)
		cur, err := os.ReadFile(p)
		if err != nil || strings.TrimSpace(string(cur)) == v {
			continue
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s to %s: %w", k, v, err))
		}
	}
	return errors.Join(errs...)
}

// removeHostPaths unmounts what is left under the host paths this run created and removes them.
func (s *realNodeState) removeHostPaths() error { return removeUnmounted(s.NewPaths) }

// removeOwnPaths removes the node's containerd and kubelet state (its logs stay).
func (s *realNodeState) removeOwnPaths() error {
	return removeUnmounted([]string{filepath.Join(s.Dir, "containerd"), filepath.Join(s.Dir, "kubelet")})
}

// removeUnmounted removes each path once nothing is mounted at or below it; RemoveAll would
// otherwise descend into a mount.
func removeUnmounted(paths []string) error {
	var errs []error
	for _, p := range paths {
		if p == "" {
			continue
		}
		if err := unmountUnder(p); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	return parseMountsUnder(raw, dir), nil
}

func parseMountsUnder(mountinfo []byte, dir string) []string {
	dir = filepath.Clean(dir)
	var out []string
	for line := range strings.SplitSeq(string(mountinfo), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder unmounts everything at or below dir, lazily when busy. A path mounted several
// times is unmounted until it no longer is.
func unmountUnder(dir string) error {
	for range 10 {
		mps, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(mps) == 0 {
			return nil
		}
		for _, mp := range mps {
			if err := syscall.Unmount(mp, 0); err != nil {
				_ = syscall.Unmount(mp, syscall.MNT_DETACH)
			}
		}
	}
	mps, _ := mountsUnder(dir)
	if len(mps) > 0 {
		return fmt.Errorf("still mounted: %v", mps)
	}
	return nil
}
