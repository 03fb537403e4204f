package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// toolBinaries are what `make tools` builds and the bed needs.
var toolBinaries = []string{"kwokctl", "kwok", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"}

// versionedTools are what `make tools` builds, named with their version (test/tools/versions.env
// key, name before -<version>), and the bed needs.
var versionedTools = []struct{ key, name string }{{localPathVersionKey, localPathName}}

// kwokctl runs kwokctl with the bed's binaries and work dir.
type kwokctl struct {
	toolsDir string
	workDir  string // KWOK_WORKDIR
}

// ToolsDir resolves the folder of the test bed's binaries: dir if given, else $FLOTILLA_TOOLS_DIR,
// else the folder test/tools/install.sh names. It fails, naming `make tools`, when a binary is missing.
func ToolsDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("FLOTILLA_TOOLS_DIR")
	}
	if dir == "" {
		_, file, _, ok := runtime.Caller(0)
		if !ok {
			return "", errors.New("testbed: cannot locate test/tools; set FLOTILLA_TOOLS_DIR")
		}
		script := filepath.Join(filepath.Dir(file), "..", "tools", "install.sh")
		out, err := exec.Command("bash", script, "print-dir").Output()
		if err != nil {
			return "", fmt.Errorf("asking %s for the tools dir: %w", script, err)
		}
		dir = strings.TrimSpace(string(out))
	}
	names := slices.Clone(toolBinaries)
	for _, t := range versionedTools {
		v, err := toolVersion(t.key)
		if err != nil {
			return "", err
		}
		names = append(names, t.name+"-"+v)
	}
	for _, b := range names {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("testbed: %s not found in %s: run `make tools` first", b, dir)
		}
	}
	return dir, nil
}

func findTools(dir string) (kwokctl, error) {
	d, err := ToolsDir(dir)
	return kwokctl{toolsDir: d}, err
}

func (k kwokctl) withWorkDir(dir string) kwokctl { k.workDir = dir; return k }

func (k kwokctl) clusterDir(name string) string { return filepath.Join(k.workDir, "clusters", name) }

// auditWritesPolicy logs each write once (when its response is sent) with its user and object,
// no bodies; reads, Events and Leases not at all.
const auditWritesPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
- level: None
  resources:
  - group: ""
    resources: [events]
  - group: events.k8s.io
    resources: [events]
  - group: coordination.k8s.io
    resources: [leases]
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
`

func (k kwokctl) bin(name string) string { return filepath.Join(k.toolsDir, name) }

// run runs kwokctl; its (JSON, verbose) output is shown only when it fails.
func (k kwokctl) run(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, k.bin("kwokctl"), args...)
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+k.workDir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kwokctl %s: %w\n%s", strings.Join(args[:min(4, len(args))], " "), err, lastLines(out.String(), 20))
	}
	return nil
}

// createCluster starts one cluster. The API server gets kwokctl's admin certificate as its kubelet
// client certificate: kwokctl gives it none, and an authenticated kubelet API (a virtual node's)
// would refuse anonymous `kubectl logs/exec`.
// With a real node (rn), the primary also gets the API server settings that node needs.
func (k kwokctl) createCluster(ctx context.Context, c *Cluster, kubeconfig string, opts Options, rn *RealNode, log io.Writer) error {
	pki := filepath.Join(k.clusterDir(c.Name), "pki")
	extra := []string{
		"kube-apiserver=kubelet-client-certificate=" + filepath.Join(pki, "admin.crt"),
		"kube-apiserver=kubelet-client-key=" + filepath.Join(pki, "admin.key"),
		// Alone in their cluster, they need no leader election; with it, they exit for good when
		// their API server is frozen longer than the lease (outage tests do that), and nothing restarts them.
		"kube-controller-manager=leader-elect=false",
		"kube-scheduler=leader-elect=false",
		// Aggregated APIs (metrics.k8s.io, from the bed's metrics-server) reached at their
		// endpoints: no cluster has kube-proxy for their Service IPs (the primary's real node has,
		// but its host's API server does not route through it).
		"kube-apiserver=enable-aggregator-routing=true",
		// kube-controller-manager signs approved CSRs (kubelet-serving among them: the virtual
		// nodes' serving certificates) with the cluster's CA; kwokctl gives it no signing key.
		"kube-controller-manager=cluster-signing-cert-file=" + filepath.Join(pki, "ca.crt"),
		"kube-controller-manager=cluster-signing-key-file=" + filepath.Join(pki, "ca.key"),
	}
	if opts.Tracing {
		extra = append(extra, "kube-apiserver=tracing-config-file="+apiServerTracingPath(filepath.Dir(k.workDir)))
	}
	var controlPlane [3]string
	for i, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		path, err := kubeBinary(k.toolsDir, name, c.KubeVersion)
		if err != nil {
			return err
		}
		controlPlane[i] = path
	}
	args := []string{
		"create", "cluster", "--name", c.Name, "--runtime", "binary",
		"--kube-apiserver-binary", controlPlane[0],
		"--kube-controller-manager-binary", controlPlane[1],
		"--kube-scheduler-binary", controlPlane[2],
		"--etcd-binary", k.bin("etcd"),
		"--kwok-controller-binary", k.bin("kwok"),
		"--kubeconfig", kubeconfig,
		"--secure-port=true", "--kube-authorization=true", "--kube-admission=true",
		"--disable-qps-limits",
		"--wait", "2m",
	}
	switch c.Role {
	case RolePrimary:
		admission, err := k.writeWebhookAdmissionConfig(c.Name, pki)
		if err != nil {
			return err
		}
		// kwok would otherwise take over Flotilla's virtual nodes and fake their pods.
		extra = append(extra,
			"kube-apiserver=admission-control-config-file="+admission,
			"kwok-controller=manage-all-nodes=false",
			"kwok-controller=manage-nodes-with-annotation-selector="+FakeNodeAnnotation+"=fake",
			"kube-controller-manager=node-monitor-grace-period="+opts.NodeMonitorGracePeriod.String(),
		)
		gates, err := workloadAPIArgs(c.KubeVersion)
		if err != nil {
			return err
		}
		extra = append(extra, gates...)
		hbArgs, hbExtra := heartbeatArgs(opts.NodeMonitorGracePeriod)
		args, extra = append(args, hbArgs...), append(extra, hbExtra...)
		if rn != nil {
			rnArgs, rnExtra := rn.kwokctlArgs()
			args, extra = append(args, rnArgs...), append(extra, rnExtra...)
		}
	case RoleSecondary:
		args = append(args, "--enable-crds=Stage,ClusterLogs,ClusterExec,ClusterAttach,ClusterPortForward,Metric,ClusterResourceUsage")
		if opts.AuditWrites {
			policy := filepath.Join(k.workDir, "audit-writes.yaml")
			if err := os.MkdirAll(k.workDir, 0o750); err != nil {
				return fmt.Errorf("creating %s: %w", k.workDir, err)
			}
			if err := os.WriteFile(policy, []byte(auditWritesPolicy), 0o600); err != nil {
				return fmt.Errorf("writing the audit policy: %w", err)
			}
			args = append(args, "--kube-audit-policy", policy)
		}
		if c.RealNode != nil {
			args = append(args, "--config", c.RealNode.kwokctlConfigPath())
			extra = append(extra, secondaryRealNodeExtraArgs()...)
		}
	}
	if err := os.MkdirAll(k.workDir, 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", k.workDir, err)
	}
	if !slices.Contains(args, "--config") {
		ports, err := k.writePortsConfig(c.Name)
		if err != nil {
			return err
		}
		args = append(args, "--config", ports)
	}
	for _, e := range orderExtraArgs(extra) {
		args = append(args, "--extra-args", e)
	}
	start := time.Now()
	if err := k.run(ctx, args...); err != nil {
		return err
	}
	fmt.Fprintf(log, "testbed: cluster %s created in %s\n", c.Name, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// WebhookClientName is the common name of the client certificate the primary's API server
// presents to admission webhooks (kwokctl's admin certificate): the manager's
// --webhook-client-names.
const WebhookClientName = "kwok-admin"

// writeWebhookAdmissionConfig writes the primary API server's admission configuration: it presents
// a client certificate (kwokctl's admin one, signed by the cluster's client CA) to every admission
// webhook, as a cluster whose webhooks authenticate the API server is set up (docs/install.md).
func (k kwokctl) writeWebhookAdmissionConfig(cluster, pki string) (string, error) {
	dir := filepath.Join(k.workDir, "admission-"+cluster)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	kubeconfig := filepath.Join(dir, "webhook-kubeconfig.yaml")
	// "*": every webhook, whatever its address.
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
users:
- name: "*"
  user:
    client-certificate: `+filepath.Join(pki, "admin.crt")+`
    client-key: `+filepath.Join(pki, "admin.key")+`
`), 0o600); err != nil {
		return "", fmt.Errorf("writing the webhooks' kubeconfig: %w", err)
	}
	config := filepath.Join(dir, "admission.yaml")
	plugin := func(name string) string {
		return `- name: ` + name + `
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: ` + kubeconfig + `
`
	}
	if err := os.WriteFile(config, []byte("apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n"+
		plugin("MutatingAdmissionWebhook")+plugin("ValidatingAdmissionWebhook")), 0o600); err != nil {
		return "", fmt.Errorf("writing the admission configuration: %w", err)
	}
	return config, nil
}

// writePortsConfig writes a kwokctl configuration that gives the cluster's components ports the
// bed picked free, below kwokPortScanFloor, and returns its path. kwokctl itself takes the first
// free ports counting down from 32767, skipping only those of the clusters in its own work dir:
// two beds on one host (make e2e runs two) took the same ones, and a cluster created while
// another bed's was stopped could take that one's for good. A cluster with a real node's kwokctl
// configuration (kwokctl reads only the first) keeps kwokctl's choice: one such bed runs at a time.
func (k kwokctl) writePortsConfig(cluster string) (string, error) {
	var ports [6]int
	for i := range ports {
		p, err := freePortBelow(kwokPortScanFloor)
		if err != nil {
			return "", fmt.Errorf("picking the ports of cluster %s: %w", cluster, err)
		}
		ports[i] = p
	}
	path := filepath.Join(k.workDir, cluster+"-ports.yaml")
	raw := fmt.Appendf(nil, `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  etcdPeerPort: %d
  etcdPort: %d
  kubeApiserverPort: %d
  kwokControllerPort: %d
  kubeControllerManagerPort: %d
  kubeSchedulerPort: %d
`, ports[0], ports[1], ports[2], ports[3], ports[4], ports[5])
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}

// kwokPortScanFloor bounds the ports the bed picks for kwokctl's components: kwokctl's own scan
// counts down from 32767 and never reaches it (a bed has a few dozen ports).
const kwokPortScanFloor = 32000

// heartbeatArgs make kwok renew the primary's fake nodes' Leases every grace/4. kwokctl multiplies
// its heartbeat settings by --heartbeat-factor, 5 unless given: kwok renewed them every 200 s / 4 =
// 50 s, longer than the primary's grace period, so its fake node went NotReady and back again and
// again. The node monitor period is a quarter of the grace period too (kube-controller-manager's
// default is 5 s against 40 s): the factor made it 25 s, so a node whose heartbeat stopped went
// Unknown up to 25 s after its grace period instead of within 5 s.
func heartbeatArgs(grace time.Duration) (args, extra []string) {
	lease := max(4, int(grace/time.Second))
	period := max(time.Second, grace/4)
	return []string{"--heartbeat-factor=1", "--node-lease-duration-seconds=" + strconv.Itoa(lease)},
		[]string{"kube-controller-manager=node-monitor-period=" + period.String()}
}

// orderExtraArgs puts the first "component=key=value" of each component before all the others.
// kwokctl v0.8.0 indexes its per-component patches by the position of a component's first
// --extra-args flag, and panics (index out of range) unless those come first, in order.
func orderExtraArgs(args []string) []string {
	seen := map[string]bool{}
	var first, rest []string
	for _, a := range args {
		component, _, _ := strings.Cut(a, "=")
		if seen[component] {
			rest = append(rest, a)
			continue
		}
		seen[component] = true
		first = append(first, a)
	}
	return append(first, rest...)
}

// deleteCluster stops a cluster: its volumes go first, then kwokctl (it removes the folder), then
// by PID whatever it left running, waiting until every process is gone.
func (k kwokctl) deleteCluster(ctx context.Context, name string, log io.Writer) error {
	pids := readPIDs(k.clusterDir(name))
	var errs []error
	// A real node's helper pods wrote them as root; nothing is mounted there on the host (the
	// node's mounts stay in its own mount namespace), but should something be, RemoveAll (kwokctl's
	// too) must not descend into it.
	if err := removeUnmounted([]string{volumesDir(k.clusterDir(name))}); err != nil {
		errs = append(errs, fmt.Errorf("removing the volumes of %s: %w", name, err))
	}
	if _, err := os.Stat(k.clusterDir(name)); err == nil {
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		if err := k.run(dctx, "delete", "cluster", "--name", name); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	if left := killAndWait(pids, 10*time.Second); len(left) > 0 {
		errs = append(errs, fmt.Errorf("cluster %s: processes %v still running after SIGKILL", name, left))
	}
	if len(errs) == 0 {
		fmt.Fprintf(log, "testbed: cluster %s stopped\n", name)
	}
	return errors.Join(errs...)
}

// readPIDs reads kwokctl's PID files of a cluster.
func readPIDs(clusterDir string) []int {
	files, _ := filepath.Glob(filepath.Join(clusterDir, "pids", "*.pid"))
	var pids []int
	for _, f := range files {
		if pid := readPIDFile(f); pid != 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// readPIDFile is the PID a file records, 0 when it has none.
func readPIDFile(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
		return pid
	}
	return 0
}

// alive keeps the PIDs whose process exists and is not a zombie.
func alive(pids []int) []int {
	var out []int
	for _, pid := range pids {
		if processAlive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no procfs: trust kill(0)
	}
	// The state follows the command name in parentheses; Z is a zombie, X is dead.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

// killAndWait sends SIGTERM to the live PIDs, waits up to grace, then SIGKILLs the rest and waits
// a little more. It returns what is still alive.
func killAndWait(pids []int, grace time.Duration) []int {
	live := alive(pids)
	for _, pid := range live {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	if live = waitGone(live, grace); len(live) == 0 {
		return nil
	}
	for _, pid := range live {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return waitGone(live, 5*time.Second)
}

func waitGone(pids []int, d time.Duration) []int {
	deadline := time.Now().Add(d)
	for {
		pids = alive(pids)
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// workloadAPIArgs serve Kubernetes' pod groups in a primary: on 1.35 the Workload API
// (scheduling.k8s.io/v1alpha1) and pods' spec.workloadRef, from 1.36 PodGroups (v1alpha2 in 1.36,
// v1beta1 from 1.37) and pods' spec.schedulingGroup; their gangs are what Flotilla places whole.
// The API server alone (no scheduler here gangs proxies); an API server refuses a runtime-config
// of a version it lacks, so each minor gets its own.
func workloadAPIArgs(version string) ([]string, error) {
	if version == "" {
		v, err := DefaultKubeVersion()
		if err != nil {
			return nil, err
		}
		version = v
	}
	served := map[string]string{"v1.35.": "v1alpha1", "v1.36.": "v1alpha2", "v1.37.": "v1beta1"}
	for prefix, v := range served {
		if strings.HasPrefix(version, prefix) {
			// The controller manager too: from 1.37 its podgroup-protection controller removes the
			// finalizer the API server gives each PodGroup (without it a namespace with one hangs).
			return []string{"kube-apiserver=feature-gates=GenericWorkload=true", "kube-apiserver=runtime-config=scheduling.k8s.io/" + v + "=true",
				"kube-controller-manager=feature-gates=GenericWorkload=true"}, nil
		}
	}
	return nil, nil
}
