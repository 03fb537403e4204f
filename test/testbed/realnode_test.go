package testbed

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-dev/flotilla/internal/ociimage"
)

func TestPickCIDRSkipsHostNetworks(t *testing.T) {
	mustNet := func(s string) *net.IPNet { _, n, _ := net.ParseCIDR(s); return n }
	tests := []struct {
		name  string
		taken []*net.IPNet
		want  string
	}{
		{"free", []*net.IPNet{mustNet("192.0.2.0/24")}, "10.244.0.0/24"},
		{"host in 10/8", []*net.IPNet{mustNet("10.0.0.0/8")}, "172.30.244.0/24"},
		{"host inside the first candidate", []*net.IPNet{mustNet("10.244.0.128/25")}, "10.245.0.0/24"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pickCIDR(podCIDRCandidates, tc.taken)
			if err != nil || got.String() != tc.want {
				t.Fatalf("pickCIDR = %v, %v; want %s", got, err, tc.want)
			}
		})
	}
	if _, err := pickCIDR([]string{"10.0.0.0/24"}, []*net.IPNet{mustNet("0.0.0.0/1")}); err == nil {
		t.Fatal("want an error when every candidate is taken")
	}
	if ip := nthIP(mustNet("10.0.0.0/24"), 1); ip.String() != "10.0.0.1" {
		t.Fatalf("nthIP = %s", ip)
	}
}

func TestParseRoutesReadsProcNetRoute(t *testing.T) {
	raw := []byte("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
		"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n")
	routes, err := parseRoutes(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(routes) != 2 || !routes[0].isDefault() || routes[1].dst.String() != "192.0.2.0/24" || routes[1].iface != "eth0" {
		t.Fatalf("routes = %+v", routes)
	}
}

func TestFilterChainsKeepsForeignRules(t *testing.T) {
	dump := []byte(`*nat
:PREROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:CNI-abc - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -s 10.244.0.2/32 -j CNI-abc
-A POSTROUTING -o eth0 -j MASQUERADE
COMMIT
`)
	kept, dropped := filterChains(dump)
	want := "*nat\n:PREROUTING ACCEPT [0:0]\n-A POSTROUTING -o eth0 -j MASQUERADE\nCOMMIT\n"
	if string(kept) != want || dropped != 4 {
		t.Fatalf("kept %q (dropped %d), want %q", kept, dropped, want)
	}
}

func TestMountsUnderListsDeepestFirst(t *testing.T) {
	info := []byte(`22 1 0:21 / / rw - ext4 /dev/vda rw
30 22 0:30 / /work/bed/realnode/kubelet/root rw - ext4 /dev/vda rw
31 30 0:31 / /work/bed/realnode/kubelet/root/pods/x/volumes/token rw - tmpfs tmpfs rw
32 22 0:32 / /work/bed/realnode-other rw - tmpfs tmpfs rw
33 22 0:33 / /work/bed/realnode/with\040space rw - tmpfs tmpfs rw
`)
	got := parseMountsUnder(info, "/work/bed/realnode")
	want := []string{"/work/bed/realnode/kubelet/root/pods/x/volumes/token", "/work/bed/realnode/kubelet/root", "/work/bed/realnode/with space"}
	if !slices.Equal(got, want) {
		t.Fatalf("mountsUnder = %q, want %q", got, want)
	}
}

func TestHeartbeatIsAQuarterOfTheGracePeriod(t *testing.T) {
	args, extra := heartbeatArgs(20 * time.Second)
	if !slices.Equal(args, []string{"--heartbeat-factor=1", "--node-lease-duration-seconds=20"}) {
		t.Fatalf("args = %v", args)
	}
	if !slices.Equal(extra, []string{"kube-controller-manager=node-monitor-period=5s"}) {
		t.Fatalf("extra = %v", extra)
	}
	if _, extra := heartbeatArgs(2 * time.Second); !slices.Equal(extra, []string{"kube-controller-manager=node-monitor-period=1s"}) {
		t.Fatalf("extra for a 2 s grace period = %v", extra)
	}
}

func TestRealNodeConfigsCarryTheRecipesSettings(t *testing.T) {
	n := &RealNode{Name: RealNodeName, Dir: "/w/realnode", PodCIDR: "10.244.0.0/24", GatewayIP: "10.244.0.1"}
	cfg := n.config("/w/ca.crt", "/w/primary.kubeconfig")
	for tmpl, wants := range map[string][]string{
		"containerd": {"restrict_oom_score_adj = true", `sandbox_image = "realnode.local/pause:1"`, `Root = "/run/flotilla-realnode/runc"`,
			`path = "/w/realnode/containerd/opt"`, `conf_dir = "/w/realnode/cni/net.d"`},
		"cni":        {`"bridge": "rn0"`, `"subnet": "10.244.0.0/24"`, `"dataDir": "/run/flotilla-realnode/cni-ipam"`},
		"kubelet":    {"failCgroupV1: false", "port: 10350", `clientCAFile: "/w/ca.crt"`, "imageGCHighThresholdPercent: 100", "nodeLeaseDurationSeconds: 20", `key: "testbed.flotilla.dev/real-node"`},
		"kube-proxy": {"hostnameOverride: realnode", "localhostNodePorts: false", "maxPerCore: 0", `kubeconfig: "/w/primary.kubeconfig"`},
	} {
		t.Run(tmpl, func(t *testing.T) {
			tm := map[string]*template.Template{"containerd": containerdTmpl, "cni": cniTmpl, "kubelet": kubeletTmpl, "kube-proxy": kubeProxyTmpl}[tmpl]
			raw, err := render(tm, cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range wants {
				if !bytes.Contains(raw, []byte(w)) {
					t.Errorf("%s config lacks %q:\n%s", tmpl, w, raw)
				}
			}
		})
	}
	if got := string(kwokctlConfig(net.ParseIP("10.0.0.1"))); !strings.Contains(got, `kubeApiserverCertSANs: ["10.0.0.1"]`) {
		t.Fatalf("kwokctl config:\n%s", got)
	}
}

// hostSnapshot is what the real node may change on this host, as a test compares it.
type hostSnapshot struct {
	sysctls, rules, mounts, links, netns, paths, cgroups, routes []string
}

// realNodeHost begins every test that brings real nodes up on this host: it runs only with
// FLOTILLA_REAL_NODE=1 (it changes the host, as root), and holds the bed lock first, so another
// bed's real nodes neither make this host look unavailable nor reach its snapshot.
func realNodeHost(t *testing.T) {
	t.Helper()
	if os.Getenv("FLOTILLA_REAL_NODE") == "" {
		t.Skip("changes this host as root: set FLOTILLA_REAL_NODE=1 to run it")
	}
	release, err := HoldBedLock(t.Context(), testLog{t}, BedLockWait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
}

// hostBefore cleans up after crashed beds and snapshots the host, to compare with after teardown.
func hostBefore(t *testing.T) hostSnapshot {
	t.Helper()
	if err := CleanUpCrashedBeds(t.Context(), testLog{t}); err != nil {
		t.Fatal(err)
	}
	return snapshotForTest(t)
}

func snapshotForTest(t *testing.T) hostSnapshot {
	t.Helper()
	var s hostSnapshot
	for _, k := range realNodeSysctls {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			s.sysctls = append(s.sysctls, k+"="+strings.TrimSpace(string(v)))
		}
	}
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		out, _ := exec.Command(tool).Output()
		for line := range strings.SplitSeq(string(out), "\n") {
			// Rules and user chains only: iptables-nft shows the built-in chains of any table it
			// was asked about, which says nothing about what is filtered.
			if strings.HasPrefix(line, "-A") || (strings.HasPrefix(line, ":") && strings.Contains(line, " - [")) {
				s.rules = append(s.rules, tool+" "+line)
			}
		}
	}
	raw, _ := os.ReadFile("/proc/self/mountinfo")
	for line := range strings.SplitSeq(string(raw), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			s.mounts = append(s.mounts, unescapeMount(f[4]))
		}
	}
	ifaces, _ := net.Interfaces()
	for _, i := range ifaces {
		s.links = append(s.links, i.Name)
	}
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		s.netns = append(s.netns, e.Name())
	}
	for _, p := range append(slices.Clone(realNodeHostPaths), realNodeRunDir) {
		if _, err := os.Lstat(p); err == nil {
			s.paths = append(s.paths, p)
		}
	}
	s.cgroups = kubepodsDirs()
	for _, h := range cgroupHierarchies() {
		fl, _ := filepath.Glob(filepath.Join(h, "fl-*"))
		s.cgroups = append(s.cgroups, fl...)
	}
	if _, err := os.Lstat(netnsRunRoot); err == nil {
		s.paths = append(s.paths, netnsRunRoot)
	}
	out, _ := exec.Command("ip", "-o", "route", "show", "table", "all").Output()
	s.routes = strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, name := range kubeProxyNfacct {
		if ok, _ := nfacctExists(name); ok {
			s.paths = append(s.paths, "nfacct:"+name)
		}
	}
	for _, l := range [][]string{s.sysctls, s.rules, s.mounts, s.links, s.netns, s.paths, s.cgroups, s.routes} {
		sort.Strings(l)
	}
	return s
}

func (s hostSnapshot) diff(after hostSnapshot) []string {
	var out []string
	names := []string{"sysctls", "iptables rules", "mounts", "links", "netns", "host paths and nfacct objects", "cgroups", "routes"}
	before := [][]string{s.sysctls, s.rules, s.mounts, s.links, s.netns, s.paths, s.cgroups, s.routes}
	now := [][]string{after.sysctls, after.rules, after.mounts, after.links, after.netns, after.paths, after.cgroups, after.routes}
	for i := range names {
		if !slices.Equal(before[i], now[i]) {
			out = append(out, fmt.Sprintf("%s: before %q, after %q", names[i], before[i], now[i]))
		}
	}
	return out
}

// rnprobeSource is a static probe for the real node's pods: it logs, echoes what exec gives it,
// reads /version through the `kubernetes` Service with its ServiceAccount, and dials an address.
const rnprobeSource = `package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] == "serve" {
		for i := 0; ; i++ {
			fmt.Printf("rnprobe alive %d uid=%d\n", i, os.Getuid())
			time.Sleep(5 * time.Second)
		}
	}
	switch os.Args[1] {
	case "version":
		sa := "/var/run/secrets/kubernetes.io/serviceaccount/"
		token, err := os.ReadFile(sa + "token")
		check(err)
		ca, err := os.ReadFile(sa + "ca.crt")
		check(err)
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		u := "https://" + net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")) + "/version"
		// Three tries, as any client of the API server retries: the spec is that the Service
		// routes at all, and a single lost SYN on a loaded host is not that.
		var resp *http.Response
		for try := 1; ; try++ {
			req, err := http.NewRequest(http.MethodGet, u, nil)
			check(err)
			req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
			if resp, err = c.Do(req); err == nil || try == 3 {
				check(err)
				break
			}
			fmt.Printf("try %d: %v\n", try, err)
			time.Sleep(time.Second)
		}
		body, _ := io.ReadAll(resp.Body)
		fmt.Printf("GET %s: %s %s\n", u, resp.Status, body)
	case "listen":
		l, err := net.Listen("tcp", os.Args[2])
		check(err)
		fmt.Printf("listening on %s\n", os.Args[2])
		for {
			conn, err := l.Accept()
			check(err)
			fmt.Fprintf(conn, "hello from %s\n", conn.LocalAddr())
			fmt.Printf("accepted %s\n", conn.RemoteAddr())
			conn.Close()
		}
	case "dial":
		// dial ADDR [TRIES]: one try unless told, for the spec that wants it to fail.
		tries := 1
		if len(os.Args) > 3 {
			tries, _ = strconv.Atoi(os.Args[3])
		}
		conn, err := net.DialTimeout("tcp", os.Args[2], 5*time.Second)
		for try := 2; err != nil && try <= tries; try++ {
			fmt.Printf("try %d: %v\n", try-1, err)
			time.Sleep(time.Second)
			conn, err = net.DialTimeout("tcp", os.Args[2], 5*time.Second)
		}
		check(err)
		conn.Close()
		fmt.Printf("dial %s: ok\n", os.Args[2])
	default:
		fmt.Printf("exec: %s uid %d\n", strings.Join(os.Args[1:], " "), os.Getuid())
	}
}

func check(err error) {
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
}
`

// buildProbeImage builds rnprobe, static, into an image tarball.
func buildProbeImage(t *testing.T, ref string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{"go.mod": "module rnprobe\n\ngo 1.25\n", "main.go": rnprobeSource} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", "rnprobe", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building rnprobe: %v\n%s", err, out)
	}
	platform := "linux/" + runtime.GOARCH
	tar := filepath.Join(dir, "rnprobe.tar")
	spec := ociimage.Spec{Ref: ref, Entrypoint: "/rnprobe", User: "65532:65532", Binaries: map[string]string{platform: filepath.Join(dir, "rnprobe")}}
	if err := ociimage.WriteTarball(spec, platform, tar); err != nil {
		t.Fatal(err)
	}
	return tar
}

func probePod(image string) *corev1.Pod {
	yes, no := true, false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "rnprobe", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{RealNodeKey: "true"},
			Tolerations:  []corev1.Toleration{{Key: RealNodeKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "probe", Image: image, ImagePullPolicy: corev1.PullNever, Args: []string{"serve"},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
}

// rss reads a process' resident set size.
func rss(pid int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return fmt.Sprintf("%d MiB", kb/1024)
		}
	}
	return "?"
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestRealNode brings up a primary with its real node, runs a pod from an imported image, uses
// logs, exec and the `kubernetes` Service from it, tears down and checks the host is as before.
// It changes the host (as root), so it runs only with FLOTILLA_REAL_NODE=1.
func TestRealNode(t *testing.T) {
	realNodeHost(t)
	ctx := t.Context()
	if err := RealNodeAvailable(); err != nil {
		t.Fatal(err)
	}
	before := hostBefore(t)
	work := t.TempDir()
	start := time.Now()
	bed, err := Start(ctx, Options{WorkDir: filepath.Join(work, "bed"), NoSecondaries: true, RealNode: true, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	upTime := time.Since(start)
	stopped := false
	// Also when the test fails: the host must be restored whatever happened.
	t.Cleanup(func() {
		if !stopped {
			_ = bed.SaveLogs(filepath.Join(work, "logs"))
			// t.Context() is cancelled before cleanups run; the kwokctl part of Stop needs a live one.
			if err := bed.Stop(context.WithoutCancel(t.Context())); err != nil {
				t.Errorf("stopping the bed: %v", err)
			}
		}
	})
	n := bed.RealNode
	t.Logf("bed with real node up in %s: host IP %s, pods %s, Services %s", upTime.Round(100*time.Millisecond), n.HostIP, n.PodCIDR, n.ServiceCIDR)

	cs := bed.Primary.Clientset
	for _, name := range append([]string{RealNodeName}, bed.Primary.Nodes...) {
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil || !NodeReady(node) {
			t.Fatalf("node %s not Ready: %v", name, err)
		}
	}

	restartExitedController(ctx, t, bed, bed.Primary)

	imgStart := time.Now()
	tar := buildProbeImage(t, "realnode.local/rnprobe:1")
	buildTime := time.Since(imgStart)
	if err := n.ImportImage(ctx, tar); err != nil {
		t.Fatal(err)
	}
	t.Logf("probe image built in %s, imported in %s", buildTime.Round(100*time.Millisecond), (time.Since(imgStart) - buildTime).Round(100*time.Millisecond))

	podStart := time.Now()
	if _, err := cs.CoreV1().Pods("default").Create(ctx, probePod("realnode.local/rnprobe:1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pod, err = cs.CoreV1().Pods("default").Get(ctx, "rnprobe", metav1.GetOptions{})
		return err == nil && pod.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		t.Fatalf("probe pod not Running: %v (%+v)", err, pod.Status)
	}
	t.Logf("probe pod Running on %s with IP %s in %s", pod.Spec.NodeName, pod.Status.PodIP, time.Since(podStart).Round(100*time.Millisecond))
	_, podNet, _ := net.ParseCIDR(n.PodCIDR)
	if pod.Spec.NodeName != RealNodeName || !podNet.Contains(net.ParseIP(pod.Status.PodIP)) {
		t.Fatalf("pod on %s with IP %s, want %s in %s", pod.Spec.NodeName, pod.Status.PodIP, RealNodeName, n.PodCIDR)
	}

	kubectl := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, filepath.Join(bed.tools.toolsDir, "kubectl"),
			append([]string{"--kubeconfig", bed.KubeconfigPath}, args...)...).CombinedOutput()
		if err != nil {
			logServiceRoutes(t, n)
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		t.Logf("kubectl %s: %s", strings.Join(args, " "), strings.TrimSpace(string(out)))
		return string(out)
	}
	if out := kubectl("logs", "rnprobe"); !strings.Contains(out, "rnprobe alive 0 uid=65532") {
		t.Errorf("logs: %q", out)
	}
	if out := kubectl("exec", "rnprobe", "--", "/rnprobe", "hello"); !strings.Contains(out, "exec: hello uid 65532") {
		t.Errorf("exec: %q", out)
	}
	svc := "https://" + net.JoinHostPort(n.KubernetesServiceIP, "443") + "/version: 200 OK"
	version, err := bed.Primary.Clientset.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if out := kubectl("exec", "rnprobe", "--", "/rnprobe", "version"); !strings.Contains(out, svc) || !strings.Contains(out, version.GitVersion) {
		t.Errorf("the pod did not reach the API server at the kubernetes ClusterIP (%s): %q", svc, out)
	}
	apiURL, _ := url.Parse(bed.Primary.RESTConfig.Host)
	hostAPI := net.JoinHostPort(n.HostIP, apiURL.Port())
	if out := kubectl("exec", "rnprobe", "--", "/rnprobe", "dial", hostAPI, "3"); !strings.Contains(out, "ok") {
		t.Errorf("the pod did not reach the host's API server at %s: %q", hostAPI, out)
	}

	var usage []string
	for name, p := range n.state.Procs {
		usage = append(usage, fmt.Sprintf("%s %s", name, rss(p.PID)))
	}
	for _, pid := range n.state.shimPIDs() {
		usage = append(usage, fmt.Sprintf("shim %s", rss(pid)))
	}
	sort.Strings(usage)
	t.Logf("RSS: %s", strings.Join(usage, ", "))

	pids := bed.PIDs()
	stopStart := time.Now()
	stopped = true
	if err := bed.Stop(ctx); err != nil {
		t.Fatalf("stopping the bed: %v", err)
	}
	t.Logf("bed stopped (real node first) in %s", time.Since(stopStart).Round(100*time.Millisecond))
	for _, pid := range pids {
		if processAlive(pid) {
			t.Errorf("pid %d still running after Stop", pid)
		}
	}
	if d := before.diff(snapshotForTest(t)); len(d) > 0 {
		t.Fatalf("the host differs after teardown:\n%s", strings.Join(d, "\n"))
	}
}

// restartExitedController kills a cluster's kube-controller-manager, as one that gave up on a slow
// API server exits, and checks the bed starts that controller alone again: the API server keeps
// its process, the controller keeps running past its own wait, and the cluster works.
func restartExitedController(ctx context.Context, t *testing.T, bed *Bed, c *Cluster) {
	t.Helper()
	apiServer, err := bed.ComponentPID(c, APIServer)
	if err != nil {
		t.Fatal(err)
	}
	kcm, err := bed.ComponentPID(c, ControllerManager)
	if err != nil {
		t.Fatal(err)
	}
	if left := killAndWait([]int{kcm}, 10*time.Second); len(left) > 0 {
		t.Fatalf("kube-controller-manager (pid %d) still running", kcm)
	}
	start := time.Now()
	if err := bed.restartExitedControllers(ctx, c); err != nil {
		t.Fatal(err)
	}
	again, err := bed.ComponentPID(c, ControllerManager)
	if err != nil || again == kcm || !processAlive(again) {
		t.Fatalf("kube-controller-manager not started again: pid %d, then %d (%v)", kcm, again, err)
	}
	if pid, err := bed.ComponentPID(c, APIServer); err != nil || pid != apiServer {
		t.Fatalf("the API server was started again too: pid %d, then %d (%v)", apiServer, pid, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := WaitWorking(wctx, c); err != nil {
		t.Fatal(err)
	}
	t.Logf("an exited kube-controller-manager started again (pid %d, then %d) and the cluster works, in %s", kcm, again, time.Since(start).Round(100*time.Millisecond))
}

// logServiceRoutes logs what decides whether a pod reaches a ClusterIP, when it did not: kube-proxy's
// NAT rules for the Services, the connections conntrack tracks to the `kubernetes` Service, and the
// end of kube-proxy's log.
func logServiceRoutes(t *testing.T, n *RealNode) {
	t.Helper()
	nat, err := exec.CommandContext(context.WithoutCancel(t.Context()), "iptables-save", "-t", "nat").CombinedOutput()
	var rules []string
	for _, l := range strings.Split(string(nat), "\n") {
		if strings.Contains(l, "KUBE-SVC") || strings.Contains(l, "KUBE-SEP") || strings.Contains(l, n.KubernetesServiceIP) {
			rules = append(rules, l)
		}
	}
	t.Logf("iptables-save -t nat (%v), kube-proxy's Service rules:\n%s", err, strings.Join(rules, "\n"))
	ct, err := exec.CommandContext(context.WithoutCancel(t.Context()), "conntrack", "-L", "-d", n.KubernetesServiceIP).CombinedOutput()
	t.Logf("conntrack -L -d %s (%v):\n%s", n.KubernetesServiceIP, err, ct)
	raw, _ := os.ReadFile(filepath.Join(n.Dir, "logs", "kube-proxy.log"))
	t.Logf("kube-proxy log, last lines:\n%s", lastLines(string(raw), 20))
}
