package testbed

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

func TestSubnetsCarvesTheIthRange(t *testing.T) {
	if got := subnets([]string{"172.31.250.0/24", "10.0.0.0/30"}, 30, 1); len(got) != 1 || got[0] != "172.31.250.4/30" {
		t.Fatalf("subnets /30, index 1 = %v", got)
	}
	if got := subnets([]string{"10.246.0.0/16"}, 24, 2); len(got) != 1 || got[0] != "10.246.2.0/24" {
		t.Fatalf("subnets /24, index 2 = %v", got)
	}
}

func TestSecondaryRealNodeConfigsAreItsOwn(t *testing.T) {
	nodes, err := planSecondaryRealNodes("/w", "/tools", []*Cluster{{Name: "secondary1"}, {Name: "secondary2"}},
		&RealNode{PodCIDR: "10.244.0.0/24"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := nodes[0], nodes[1]
	if a.Name != "secondary1-real" || a.Netns != "fl-secondary1" || a.hostVeth != "flh-secondary1" || a.cgroup != "fl-secondary1" {
		t.Fatalf("names: %+v", a)
	}
	_, pa, _ := net.ParseCIDR(a.PodCIDR)
	_, pb, _ := net.ParseCIDR(b.PodCIDR)
	if pa.Contains(pb.IP) || pb.Contains(pa.IP) || pa.Contains(net.ParseIP("10.244.0.1")) || a.HostIP == b.HostIP {
		t.Fatalf("ranges overlap: %s %s, veths %s %s", a.PodCIDR, b.PodCIDR, a.HostIP, b.HostIP)
	}
	raw, err := render(kubeletTmpl, a.config("/w/ca.crt", "/w/kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"cgroupRoot: /fl-secondary1", "unix:///run/flotilla-netns/secondary1/containerd.sock", "podCIDR: " + a.PodCIDR} {
		if !strings.Contains(string(raw), w) {
			t.Errorf("kubelet config lacks %q:\n%s", w, raw)
		}
	}
	if raw, _ := render(kubeletTmpl, (&RealNode{}).config("", "")); strings.Contains(string(raw), "cgroupRoot") {
		t.Errorf("the primary's real node got a cgroupRoot:\n%s", raw)
	}
}

// TestSecondaryRealNodes brings up a bed whose secondaries each have a real node in a network
// namespace of their own (and the primary its real node, where this host allows), runs a real
// container on each secondary's node that prints a line and exits 0, reads that line through the
// secondary's API server (pods/log, as kubectl logs does), has pods on secondary1's real node
// write and read a local-path volume (checkLocalPathVolume; isolated pod network only), tears down
// and checks the host is as before and the volumes are gone. It changes the host (as root), so it runs only with
// FLOTILLA_REAL_NODE=1.
func TestSecondaryRealNodes(t *testing.T) {
	realNodeHost(t)
	ctx := t.Context()
	if err := SecondaryRealNodesAvailable(); err != nil {
		t.Skip(err)
	}
	primaryNode := RealNodeAvailable() == nil
	if !primaryNode {
		t.Logf("without the primary's real node: %v", RealNodeAvailable())
	}
	before := hostBefore(t)
	iptablesLines := func() int {
		out, _ := exec.Command("iptables-save").Output()
		return strings.Count(string(out), "\n")
	}
	linesBefore := iptablesLines()
	work := t.TempDir()
	start := time.Now()
	network := PodNetwork(os.Getenv("FLOTILLA_SECONDARY_POD_NETWORK")) // "" is isolated
	bed, err := Start(ctx, Options{WorkDir: filepath.Join(work, "bed"), Secondaries: 2, NodesPerSecondary: 1,
		RealNode: primaryNode, SecondaryRealNodes: true, SecondaryPodNetwork: network, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	upTime := time.Since(start)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = bed.SaveLogs(filepath.Join(work, "logs"))
			if err := bed.Stop(context.WithoutCancel(t.Context())); err != nil {
				t.Errorf("stopping the bed: %v", err)
			}
		}
	})
	t.Logf("bed with %d secondary real nodes (primary's: %v) up in %s", len(bed.SecondaryRealNodes), primaryNode, upTime.Round(100*time.Millisecond))
	if len(bed.SecondaryRealNodes) != 2 {
		t.Fatalf("%d secondary real nodes, want 2", len(bed.SecondaryRealNodes))
	}

	tar := buildProbeImage(t, "realnode.local/rnprobe:1")
	for i, c := range bed.Secondaries {
		n := bed.SecondaryRealNodes[i]
		if c.RealNode != n || n.Cluster != c.Name {
			t.Fatalf("secondary %s has real node %+v", c.Name, c.RealNode)
		}
		t.Run(c.Name, func(t *testing.T) {
			cs := c.Clientset
			node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil || !NodeReady(node) {
				t.Fatalf("node %s not Ready: %v", n.Name, err)
			}
			if node.Labels[RealNodeKey] != "true" || len(node.Spec.Taints) == 0 || node.Spec.Taints[0].Key != RealNodeKey {
				t.Errorf("node %s: labels %v, taints %v", n.Name, node.Labels, node.Spec.Taints)
			}
			// Only its kubelet renews its Lease: the secondary's kwok leaves unannotated nodes alone (N4).
			// The kubelet creates it a moment after it registers the node.
			var holder string
			err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
				lease, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, n.Name, metav1.GetOptions{})
				if err == nil && lease.Spec.HolderIdentity != nil {
					holder = *lease.Spec.HolderIdentity
				}
				return holder != "", nil
			})
			if err != nil || holder != n.Name {
				t.Errorf("the Lease of %s is held by %q, not its kubelet: %v", n.Name, holder, err)
			}
			if err := n.ImportImage(ctx, tar); err != nil {
				t.Fatal(err)
			}
			pod := probePod("realnode.local/rnprobe:1")
			pod.Name = "hello"
			pod.Spec.RestartPolicy = corev1.RestartPolicyNever
			pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": n.Name}
			pod.Spec.Containers[0].Args = []string{"from", c.Name}
			podStart := time.Now()
			// The default ServiceAccount may not exist yet in a cluster this young.
			err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				_, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
				return err == nil, nil
			})
			if err != nil {
				t.Fatalf("creating the pod: %v", err)
			}
			var got *corev1.Pod
			err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				got, err = cs.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
				return err == nil && (got.Status.Phase == corev1.PodSucceeded || got.Status.Phase == corev1.PodFailed), nil
			})
			if err != nil || got.Status.Phase != corev1.PodSucceeded {
				t.Fatalf("pod did not succeed: %v (%+v)", err, got.Status)
			}
			_, podNet, _ := net.ParseCIDR(n.PodCIDR)
			t.Logf("pod on %s (IP %s) Succeeded in %s", got.Spec.NodeName, got.Status.PodIP, time.Since(podStart).Round(100*time.Millisecond))
			if got.Spec.NodeName != n.Name || (got.Status.PodIP != "" && !podNet.Contains(net.ParseIP(got.Status.PodIP))) {
				t.Errorf("pod on %s with IP %s, want %s in %s", got.Spec.NodeName, got.Status.PodIP, n.Name, n.PodCIDR)
			}
			// pods/log: the API server dials the kubelet at its InternalIP, across the veth.
			logs, err := cs.CoreV1().Pods("default").GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			want := fmt.Sprintf("exec: from %s uid 65532", c.Name)
			if err != nil || !strings.Contains(string(logs), want) {
				t.Fatalf("logs through %s: %q, %v; want %q", c.Name, logs, err, want)
			}
			// In-cluster configuration: the `kubernetes` ClusterIP through the node's kube-proxy,
			// the API server's certificate carrying that IP.
			version := probePod("realnode.local/rnprobe:1")
			version.Name = "version"
			version.Spec.RestartPolicy = corev1.RestartPolicyNever
			version.Spec.NodeSelector = pod.Spec.NodeSelector
			version.Spec.Containers[0].Args = []string{"version"}
			if _, err := cs.CoreV1().Pods("default").Create(ctx, version, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				got, err = cs.CoreV1().Pods("default").Get(ctx, version.Name, metav1.GetOptions{})
				return err == nil && (got.Status.Phase == corev1.PodSucceeded || got.Status.Phase == corev1.PodFailed), nil
			})
			out, _ := cs.CoreV1().Pods("default").GetLogs(version.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			wantSvc := "https://" + net.JoinHostPort(secondaryServiceIP, "443") + "/version: 200 OK"
			if err != nil || got.Status.Phase != corev1.PodSucceeded || !strings.Contains(string(out), wantSvc) {
				t.Errorf("a pod on %s did not reach its API server at the kubernetes ClusterIP: %v %q", n.Name, err, out)
			}
			var usage []string
			for name, p := range n.state.Procs {
				usage = append(usage, name+" "+rss(p.PID))
			}
			for _, pid := range (&realNodeState{RunDir: n.runDir}).shimPIDs() {
				usage = append(usage, "shim "+rss(pid))
			}
			sort.Strings(usage)
			t.Logf("logs through %s: %s; RSS of the node %d MiB (%s)", c.Name, strings.TrimSpace(string(logs)), n.RSS()>>20, strings.Join(usage, ", "))
		})
	}
	if t.Failed() {
		return
	}
	// Volumes do not depend on the pod network: checked once, with the default one.
	var kept string
	if network != PodNetworkFlat && !t.Run("volumes", func(t *testing.T) { kept = checkLocalPathVolume(t, bed.Secondaries[0]) }) {
		return
	}
	if network == PodNetworkFlat {
		t.Run("flat", func(t *testing.T) { checkPodNetwork(t, bed, true) })
	} else {
		t.Run("isolated", func(t *testing.T) { checkPodNetwork(t, bed, false) })
	}

	pids := bed.PIDs()
	stopStart := time.Now()
	stopped = true
	if err := bed.Stop(ctx); err != nil {
		t.Fatalf("stopping the bed: %v", err)
	}
	t.Logf("bed stopped (real nodes first) in %s", time.Since(stopStart).Round(100*time.Millisecond))
	if _, err := os.Stat(filepath.Dir(kept)); kept != "" && !os.IsNotExist(err) {
		t.Errorf("the volumes of %s (%s) are still there after Stop: %v", bed.Secondaries[0].Name, filepath.Dir(kept), err)
	}
	for _, pid := range pids {
		if processAlive(pid) {
			t.Errorf("pid %d still running after Stop", pid)
		}
	}
	if d := before.diff(snapshotForTest(t)); len(d) > 0 {
		t.Fatalf("the host differs after teardown:\n%s", strings.Join(d, "\n"))
	}
	if after := iptablesLines(); after != linesBefore {
		t.Fatalf("iptables-save: %d lines before, %d after", linesBefore, after)
	}
}

// checkPodNetwork has a pod on secondary1's real node dial a pod on secondary2's at its pod IP.
// Flat: it connects, and the listener saw the dialler's own pod IP (no NAT on the way). Isolated:
// it cannot connect.
func checkPodNetwork(t *testing.T, bed *Bed, flat bool) {
	ctx := t.Context()
	s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
	listen := probePod("realnode.local/rnprobe:1")
	listen.Name = "listen"
	listen.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": s2.RealNode.Name}
	listen.Spec.Containers[0].Args = []string{"listen", ":8080"}
	if _, err := s2.Clientset.CoreV1().Pods("default").Create(ctx, listen, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ip string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := s2.Clientset.CoreV1().Pods("default").Get(ctx, "listen", metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning {
			return false, nil
		}
		ip = p.Status.PodIP
		return true, nil
	})
	if err != nil {
		t.Fatalf("listener not Running: %v", err)
	}
	dial := probePod("realnode.local/rnprobe:1")
	dial.Name = "dial"
	dial.Spec.RestartPolicy = corev1.RestartPolicyNever
	dial.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": s1.RealNode.Name}
	dial.Spec.Containers[0].Args = []string{"dial", net.JoinHostPort(ip, "8080")}
	if _, err := s1.Clientset.CoreV1().Pods("default").Create(ctx, dial, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err = s1.Clientset.CoreV1().Pods("default").Get(ctx, "dial", metav1.GetOptions{})
		return err == nil && (got.Status.Phase == corev1.PodSucceeded || got.Status.Phase == corev1.PodFailed), nil
	})
	logs, _ := s1.Clientset.CoreV1().Pods("default").GetLogs("dial", &corev1.PodLogOptions{}).DoRaw(ctx)
	if !flat {
		if err != nil || got.Status.Phase != corev1.PodFailed {
			t.Fatalf("a pod of %s dialled %s in %s on an isolated pod network: %v %s %q", s1.Name, ip, s2.Name, err, got.Status.Phase, logs)
		}
		t.Logf("isolated: a pod of %s could not dial %s in %s: %s", s1.Name, ip, s2.Name, strings.TrimSpace(string(logs)))
		return
	}
	if err != nil || got.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("a pod of %s could not dial %s in %s: %v %q", s1.Name, ip, s2.Name, err, logs)
	}
	seen, _ := s2.Clientset.CoreV1().Pods("default").GetLogs("listen", &corev1.PodLogOptions{}).DoRaw(ctx)
	if !strings.Contains(string(seen), "accepted "+got.Status.PodIP+":") {
		t.Errorf("the listener saw %q, want the dialler's pod IP %s", seen, got.Status.PodIP)
	}
	t.Logf("flat: %s (%s) dialled %s in %s: %s", got.Status.PodIP, s1.Name, ip, s2.Name, strings.TrimSpace(string(seen)))
}
