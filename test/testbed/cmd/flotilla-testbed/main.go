// Command flotilla-testbed starts and stops the local development bed behind `make dev-up`,
// `make dev-down` and `make demo`: a primary and secondaries as real local clusters.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/flotilla-dev/flotilla/test/testbed"
)

const usage = `Usage: flotilla-testbed up|down|status|app-image [flags]

  up      start a primary and N secondaries (kwok fake nodes) under --dir, and write
          <dir>/kubeconfig with contexts primary, secondary1, ...; a bed already running there is kept;
          --real-node adds the primary's real node (root only; when this host cannot run it, says why
          and starts without it); --secondary-real-nodes gives each secondary one real node
          (<secondary>-real) in a network namespace of its own (likewise root only), their pods
          isolated from each other or, with --secondary-pod-network flat, routed through the host
  down    stop every cluster recorded under --dir (and its real node, restoring the host) and remove
          its state (logs/ is kept, the real node's in logs/realnode)
  status  say whether the bed under --dir answers
  app-image  build the bed's application image (` + testbed.TestAppImage + `: an HTTP server that
          answers with its pod's name, and busybox-like commands) as a tarball under --dir, for
          ctr images import on the real nodes; prints the tarball's path

Flags:
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	dir := fs.String("dir", ".testbed", "work dir of the bed")
	secondaries := fs.Int("secondaries", 2, "number of secondary clusters")
	nodes := fs.Int("nodes", 2, "fake nodes per secondary")
	tools := fs.String("tools-dir", "", "folder of the binaries `make tools` built (default $FLOTILLA_TOOLS_DIR)")
	realNode := fs.Bool("real-node", false, "up: give the primary one real node (containerd, kubelet, kube-proxy; needs root)")
	secondaryRealNodes := fs.Bool("secondary-real-nodes", false, "up: give each secondary one real node in its own network namespace (needs root)")
	tracing := fs.Bool("tracing", false, "up: start Jaeger (OTLP in, its query API and UI out) and have every API server send it a span of every request")
	podNetwork := fs.String("secondary-pod-network", "isolated", "up: isolated, or flat (the host routes between the secondaries' real nodes' pods)")
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage); fs.PrintDefaults() }
	if err := fs.Parse(os.Args[2:]); err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var err error
	switch cmd {
	case "up":
		err = up(ctx, *dir, *tools, *secondaries, *nodes, *realNode, *secondaryRealNodes, *tracing, testbed.PodNetwork(*podNetwork))
	case "down":
		err = down(ctx, *dir, *tools)
	case "status":
		err = status(ctx, *dir)
	case "app-image":
		var tar string
		if tar, err = testbed.BuildTestAppImage(ctx, filepath.Join(*dir, "images")); err == nil {
			fmt.Println(tar)
		}
	default:
		fs.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-testbed:", err)
		os.Exit(1)
	}
}

func up(ctx context.Context, dir, tools string, secondaries, nodes int, realNode, secondaryRealNodes, tracing bool, podNetwork testbed.PodNetwork) error {
	if status(ctx, dir) == nil {
		fmt.Printf("testbed: already running; kubeconfig %s\n", filepath.Join(dir, "kubeconfig"))
		return nil
	}
	// Leftovers of an earlier bed that no longer answers would hold ports and memory.
	if err := down(ctx, dir, tools); err != nil {
		return err
	}
	if realNode || secondaryRealNodes {
		// Another bed's real nodes (a test run) would make this host look unavailable: waited for.
		release, err := testbed.HoldBedLock(ctx, os.Stdout, testbed.BedLockWait)
		if err != nil {
			return err
		}
		defer release()
	}
	if realNode {
		// The demo works without it: say why and go on with fake nodes only.
		if err := testbed.RealNodeAvailableIn(tools); err != nil {
			fmt.Printf("testbed: starting without a real node: %v\n", err)
			realNode = false
		}
	}
	if secondaryRealNodes {
		if err := testbed.SecondaryRealNodesAvailableIn(tools); err != nil {
			fmt.Printf("testbed: starting without real nodes in the secondaries: %v\n", err)
			secondaryRealNodes = false
		}
	}
	bed, err := testbed.Start(ctx, testbed.Options{
		WorkDir: dir, ToolsDir: tools, Secondaries: secondaries, NodesPerSecondary: nodes,
		NoSecondaries: secondaries == 0, RealNode: realNode, SecondaryRealNodes: secondaryRealNodes, SecondaryPodNetwork: podNetwork, Log: os.Stdout,
		Tracing: tracing,
	})
	if err != nil {
		return err
	}
	for _, c := range bed.Clusters() {
		fmt.Printf("testbed: context %-12s %d fake nodes\n", c.Name, len(c.Nodes))
	}
	if n := bed.RealNode; n != nil {
		fmt.Printf("testbed: real node %s (taint %s=true:NoSchedule), host IP %s, pods %s, Services %s (kubernetes %s)\n",
			n.Name, testbed.RealNodeKey, n.HostIP, n.PodCIDR, n.ServiceCIDR, n.KubernetesServiceIP)
	}
	if j := bed.Jaeger; j != nil {
		fmt.Printf("testbed: Jaeger: OTLP gRPC at %s (the manager's --tracing-endpoint), UI and query API at %s\n", j.OTLPEndpoint, j.QueryURL)
	}
	for _, n := range bed.SecondaryRealNodes {
		fmt.Printf("testbed: real node %s of %s (taint %s=true:NoSchedule), netns %s, node IP %s, pods %s\n",
			n.Name, n.Cluster, testbed.RealNodeKey, n.Netns, n.NodeIP, n.PodCIDR)
	}
	return nil
}

func down(ctx context.Context, dir, tools string) error {
	if err := testbed.StopDir(ctx, dir, tools, os.Stdout); err != nil {
		return err
	}
	// Everything but the logs goes: the next `up` starts from nothing. The real node's logs join them.
	if err := keepRealNodeLogs(dir); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() != "logs" {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// keepRealNodeLogs moves the real nodes' logs (containerd, kubelet, kube-proxy) to
// logs/realnode and logs/realnode-<secondary>, replacing those of an earlier bed, so that they
// outlive the state `down` removes.
func keepRealNodeLogs(dir string) error {
	nodes, _ := filepath.Glob(filepath.Join(dir, "realnode-*"))
	var errs []error
	for _, n := range append([]string{filepath.Join(dir, "realnode")}, nodes...) {
		errs = append(errs, keepNodeLogs(dir, filepath.Base(n)))
	}
	return errors.Join(errs...)
}

func keepNodeLogs(dir, node string) error {
	src := filepath.Join(dir, node, "logs")
	if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	dst := filepath.Join(dir, "logs", node)
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return fmt.Errorf("keeping the real node's logs: %w", err)
	}
	if err := os.RemoveAll(dst); err != nil {
		return fmt.Errorf("keeping the real node's logs: %w", err)
	}
	if err := os.Rename(src, dst); err != nil {
		return fmt.Errorf("keeping the real node's logs: %w", err)
	}
	return nil
}

// status checks that every context of the bed's kubeconfig answers /readyz.
func status(ctx context.Context, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return testbed.Check(ctx, filepath.Join(dir, "kubeconfig"))
}
