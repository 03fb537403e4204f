package testbed

// A running cluster's life: its processes' PIDs, freezing and thawing one of them, stopping the
// whole cluster and starting it again.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Components of a cluster that can be frozen.
const (
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
)

// APIServerPID is the PID of the cluster's kube-apiserver.
func (b *Bed) APIServerPID(c *Cluster) (int, error) { return b.ComponentPID(c, APIServer) }

// ComponentPID is the PID of one of the cluster's processes (kwokctl's PID file).
func (b *Bed) ComponentPID(c *Cluster, component string) (int, error) {
	raw, err := os.ReadFile(filepath.Join(b.tools.clusterDir(c.Name), "pids", component+".pid"))
	if err != nil {
		return 0, fmt.Errorf("reading the %s PID of %s: %w", component, c.Name, err)
	}
	var pid int
	if _, err := fmt.Sscanf(string(raw), "%d", &pid); err != nil {
		return 0, fmt.Errorf("parsing the %s PID of %s: %w", component, c.Name, err)
	}
	return pid, nil
}

// Freeze stops the cluster's kube-apiserver with SIGSTOP: connections are accepted and never
// answered, as with a hung server. Thaw resumes it.
func (b *Bed) Freeze(c *Cluster) error { return b.FreezeComponent(c, APIServer) }

// Thaw resumes a frozen kube-apiserver.
func (b *Bed) Thaw(c *Cluster) error { return b.ThawComponent(c, APIServer) }

// FreezeComponent stops one process of the cluster with SIGSTOP (e.g. the controller-manager, so
// that a new namespace gets no default ServiceAccount). ThawComponent resumes it.
func (b *Bed) FreezeComponent(c *Cluster, component string) error {
	return b.signal(c, component, syscall.SIGSTOP)
}

// ThawComponent resumes a frozen process.
func (b *Bed) ThawComponent(c *Cluster, component string) error {
	return b.signal(c, component, syscall.SIGCONT)
}

func (b *Bed) signal(c *Cluster, component string, sig syscall.Signal) error {
	pid, err := b.ComponentPID(c, component)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("sending %s to the %s of %s: %w", sig, component, c.Name, err)
	}
	return nil
}

// StopCluster stops every process of a cluster, keeping its state: its clients get connection
// refused. A real node of it stops with it (its kubelet and kube-proxy; containerd and the
// containers keep running, as through a kubelet restart). StartCluster starts it again and waits
// until it is ready.
func (b *Bed) StopCluster(ctx context.Context, c *Cluster) error {
	start := time.Now()
	pids := readPIDs(b.tools.clusterDir(c.Name))
	if err := b.forgetNodeLeases(ctx, c); err != nil {
		return err
	}
	if n := c.RealNode; n != nil && n.state != nil {
		if err := n.stopAgents(); err != nil {
			return fmt.Errorf("cluster %s: stopping its real node's kubelet and kube-proxy: %w", c.Name, err)
		}
	}
	if err := b.stopProcesses(ctx, c, pids); err != nil {
		return err
	}
	fmt.Fprintf(b.log, "testbed: cluster %s stopped in %s\n", c.Name, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// stopProcesses stops the cluster with kwokctl and waits until every process it recorded before
// (pids) is gone, killing what is left.
func (b *Bed) stopProcesses(ctx context.Context, c *Cluster, pids []int) error {
	if err := b.tools.run(ctx, "stop", "cluster", "--name", c.Name); err != nil {
		return err
	}
	if left := killAndWait(pids, 10*time.Second); len(left) > 0 {
		return fmt.Errorf("cluster %s: processes %v still running", c.Name, left)
	}
	return nil
}

// forgetNodeLeases stops a cluster's kwok, then deletes its nodes' Leases while the API server
// still answers. A kwok that starts while they exist fails to create them ("already exists") and
// leaves the nodes and their pods alone until it tries again, up to a minute later; deleted after
// its start, they raced its own creation of them. kwokctl stop then skips the stopped kwok, and
// kwokctl start starts it again with no Lease to trip on.
func (b *Bed) forgetNodeLeases(ctx context.Context, c *Cluster) error {
	kwok := readPIDFile(filepath.Join(b.tools.clusterDir(c.Name), "pids", "kwok-controller.pid"))
	if kwok == 0 {
		return fmt.Errorf("cluster %s: no kwok PID file", c.Name)
	}
	if left := killAndWait([]int{kwok}, 10*time.Second); len(left) > 0 {
		return fmt.Errorf("cluster %s: kwok (pid %d) still running", c.Name, kwok)
	}
	for _, n := range c.Nodes {
		err := c.Clientset.CoordinationV1().Leases("kube-node-lease").Delete(ctx, n, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the Lease of node %s in %s: %w", n, c.Name, err)
		}
	}
	return nil
}

// StartCluster starts a stopped cluster and waits until its API server is ready, its controllers
// work (WaitWorking), the bed's own components of it (cluster DNS, metrics-server, volume
// provisioner, resizing CSI stack: kwokctl starts only its own) serve again and its real node is Ready with its
// Service rules. Those waits are independent and run side by side: each only needs the API server.
func (b *Bed) StartCluster(ctx context.Context, c *Cluster) error {
	start := time.Now()
	if err := b.tools.run(ctx, "start", "cluster", "--name", c.Name); err != nil {
		return err
	}
	if err := waitReady(ctx, c); err != nil {
		return err
	}
	ready := time.Since(start)
	wctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	steps := map[string]func(context.Context) error{"working": func(ctx context.Context) error { return WaitWorking(ctx, c) }}
	if c.DNSServiceIP != "" {
		steps["DNS"] = func(ctx context.Context) error { return b.startClusterDNS(ctx, c) }
	}
	if !b.noMetrics {
		steps["metrics.k8s.io"] = func(ctx context.Context) error { return b.startMetricsServer(ctx, c) }
	}
	if c.Role == RoleSecondary && !b.noVolumes {
		steps["volumes"] = func(ctx context.Context) error { return b.startLocalPath(ctx, c) }
	}
	if c.ResizableStorage {
		steps["resizable volumes"] = func(ctx context.Context) error { return b.startCSI(ctx, c) }
	}
	if n := c.RealNode; n != nil && n.state != nil {
		steps["real node"] = func(ctx context.Context) error { return n.startAgents(ctx, c) }
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		took = []string{fmt.Sprintf("API server ready %s", ready.Round(100*time.Millisecond))}
	)
	for name, step := range steps {
		wg.Go(func() {
			err := step(wctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			took = append(took, fmt.Sprintf("%s %s", name, time.Since(start).Round(100*time.Millisecond)))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("starting cluster %s again: %w", c.Name, err)
	}
	fmt.Fprintf(b.log, "testbed: cluster %s started again in %s: %s\n", c.Name, time.Since(start).Round(100*time.Millisecond), strings.Join(took, ", "))
	return nil
}

// UpgradeCluster upgrades a cluster's control plane in place to Kubernetes version (one test/tools
// builds, see KubeVersions): it stops the cluster as StopCluster does, puts that version's API
// server, controller manager and scheduler where kwokctl runs them from (the cluster's bin
// folder, links kwokctl made to the tools), and starts it again (StartCluster). Its etcd, and so
// every object, is kept; its real node's kubelet and kube-proxy restart on that version where
// test/tools builds them, their containers running on.
func (b *Bed) UpgradeCluster(ctx context.Context, c *Cluster, version string) error {
	links := map[string]string{}
	for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		to, err := kubeBinary(b.tools.toolsDir, name, version)
		if err != nil {
			return err
		}
		at := filepath.Join(b.tools.clusterDir(c.Name), "bin", name)
		if _, err := os.Lstat(at); err != nil {
			return fmt.Errorf("cluster %s: kwokctl runs %s from %s: %w", c.Name, name, at, err)
		}
		links[at] = to
	}
	if err := b.StopCluster(ctx, c); err != nil {
		return err
	}
	for at, to := range links {
		if err := os.Remove(at); err != nil {
			return fmt.Errorf("cluster %s: removing %s: %w", c.Name, at, err)
		}
		if err := os.Symlink(to, at); err != nil {
			return fmt.Errorf("cluster %s: linking %s to %s: %w", c.Name, at, to, err)
		}
	}
	from := c.KubeVersion
	c.KubeVersion = version
	if err := b.StartCluster(ctx, c); err != nil {
		return fmt.Errorf("upgrading cluster %s from %q to %s: %w", c.Name, from, version, err)
	}
	return nil
}
