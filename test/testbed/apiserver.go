package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// PKIDir is the folder of the cluster's certificates (kwokctl's pki: ca.crt and ca.key sign the
// API server's serving certificate, its client certificates and, through kube-controller-manager,
// CSRs).
func (c *Cluster) PKIDir() string { return filepath.Join(c.dir, "pki") }

// extraAPIServerPIDFile records an API server StartAPIServer started, beside kwokctl's PID files:
// stopping the bed stops it too, should its spec not.
func extraAPIServerPIDFile(clusterDir string, port int) string {
	return filepath.Join(clusterDir, "pids", fmt.Sprintf("kube-apiserver-%d.pid", port))
}

// StartAPIServer starts one more kube-apiserver of the cluster, on the cluster's etcd with its
// API server's own flags, at a free port, plus extra flags (e.g.
// "--kubelet-certificate-authority=..."): a spec gets an API server of its own settings while the
// cluster's, which every other spec uses, stays as it is. It does not take part in the
// `kubernetes` Service's endpoints. It returns the admin's config for it, once it is ready, and
// how to stop it.
func (c *Cluster) StartAPIServer(ctx context.Context, logPath string, extra ...string) (*rest.Config, func() error, error) {
	pid := readPIDFile(filepath.Join(c.dir, "pids", "kube-apiserver.pid"))
	if pid == 0 {
		return nil, nil, fmt.Errorf("the API server of %s is not running", c.Name)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the command line of the API server of %s: %w", c.Name, err)
	}
	cmdline := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	port, err := FreePort()
	if err != nil {
		return nil, nil, err
	}
	var args []string
	for _, a := range cmdline[1:] {
		if !strings.HasPrefix(a, "--secure-port=") && !strings.HasPrefix(a, "--endpoint-reconciler-type=") {
			args = append(args, a)
		}
	}
	args = append(args, "--secure-port="+strconv.Itoa(port), "--endpoint-reconciler-type=none")
	args = append(args, extra...)
	p, err := StartProcess("kube-apiserver-"+c.Name+"-"+strconv.Itoa(port), cmdline[0], args, logPath)
	if err != nil {
		return nil, nil, err
	}
	pidFile := extraAPIServerPIDFile(c.dir, port)
	stop := func() error {
		err := p.Stop(10 * time.Second)
		_ = os.Remove(pidFile)
		return err
	}
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(p.PID())), 0o600); err != nil {
		return nil, nil, errors.Join(fmt.Errorf("recording the extra API server of %s: %w", c.Name, err), stop())
	}
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.Host = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, errors.Join(err, stop())
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("the extra API server of %s exited (see %s)", c.Name, logPath)
		}
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && bytes.Equal(body, []byte("ok")), nil
	})
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("waiting for the extra API server of %s: %w", c.Name, err), stop())
	}
	return cfg, stop, nil
}

// FreePortRange returns the first of n consecutive TCP ports that were free on every address a
// moment ago (a process that binds them all, as the manager binds the virtual nodes' kubelet ports).
func FreePortRange(n int) (int, error) {
	low, _ := ephemeralPorts()
	handedOutMu.Lock()
	defer handedOutMu.Unlock()
	for range 200 {
		first := freePortFloor + rand.IntN(low-freePortFloor-n)
		if free := func() bool {
			for p := first; p < first+n; p++ {
				if handedOut[p] {
					return false
				}
				l, err := net.Listen("tcp", fmt.Sprintf(":%d", p))
				if err != nil {
					return false
				}
				_ = l.Close()
			}
			return true
		}(); free {
			for p := first; p < first+n; p++ {
				handedOut[p] = true
			}
			return first, nil
		}
	}
	return 0, fmt.Errorf("finding %d free consecutive ports below %d: none after 200 tries", n, low)
}
