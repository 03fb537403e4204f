package testbed

// The controllers kwokctl starts beside a cluster's API server (kube-controller-manager,
// kube-scheduler, kwok): started again when they exit as they start.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// startedControllers are the components kwokctl starts beside the API server and etcd, which
// the bed checks are still running once the API server is ready.
var startedControllers = []string{ControllerManager, "kube-scheduler", "kwok-controller"}

// Starting a controller again: kube-controller-manager waits 10 s for the API server's /healthz
// and then exits for good, which a loaded machine makes happen (the API server of a cluster
// created beside two others, a build and three containerd image imports took longer), and the
// cluster would then run without its node lifecycle, garbage collector or CSR signer.
const (
	// controllerStartAttempts is how many times an exited controller is started again.
	controllerStartAttempts = 3
	// controllerSettle is how long a controller started again must keep running to count as
	// started: longer than kube-controller-manager's own wait for the API server.
	controllerSettle = 15 * time.Second
)

// restartExitedControllers starts again, once the cluster's API server is ready, whichever of a
// new cluster's controllers exited as they started, and waits until they keep running. Nothing of
// the bed's runs in the cluster yet, and the API server they wait for already answers, so their
// start is all it takes.
func (b *Bed) restartExitedControllers(ctx context.Context, c *Cluster) error {
	exited := b.exitedControllers(c)
	for attempt := 1; len(exited) > 0; attempt++ {
		fmt.Fprintf(b.log, "testbed: cluster %s: %s exited as it started; %s\n", c.Name, strings.Join(exited, ", "), b.controllerLogTails(c, exited))
		if attempt > controllerStartAttempts {
			return fmt.Errorf("cluster %s: %s exited as it started, %d times", c.Name, strings.Join(exited, ", "), attempt)
		}
		fmt.Fprintf(b.log, "testbed: cluster %s: starting %s again (%d of %d)\n", c.Name, strings.Join(exited, ", "), attempt, controllerStartAttempts)
		if err := b.startExited(ctx, c, exited); err != nil {
			return err
		}
		var err error
		if exited, err = b.exitedWithin(ctx, c, controllerSettle); err != nil {
			return err
		}
	}
	return nil
}

// startExited starts the named components of the cluster, which exited: kwokctl start leaves
// those whose PID file names a process alone, and counts a zombie as one (an exited component
// stays one until init reaps it: kwokctl started it and exited), so their PID files go first.
// It holds the bed's creating lock: a cluster being created meanwhile picks free ports, and
// would take an exited controller's.
func (b *Bed) startExited(ctx context.Context, c *Cluster, names []string) error {
	b.creating.Lock()
	defer b.creating.Unlock()
	for _, name := range names {
		if err := os.Remove(filepath.Join(b.tools.clusterDir(c.Name), "pids", name+".pid")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("cluster %s: removing the PID file of %s: %w", c.Name, name, err)
		}
	}
	return b.tools.run(ctx, "start", "cluster", "--name", c.Name)
}

// exitedWithin watches the cluster's controllers for d and returns those that exited, as soon as
// one has.
func (b *Bed) exitedWithin(ctx context.Context, c *Cluster, d time.Duration) ([]string, error) {
	var exited []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, d, true, func(context.Context) (bool, error) {
		exited = b.exitedControllers(c)
		return len(exited) > 0, nil
	})
	if len(exited) == 0 && ctx.Err() != nil {
		return nil, fmt.Errorf("cluster %s: waiting for its controllers to keep running: %w", c.Name, err)
	}
	return exited, nil
}

// controllerLogTails says why controllers exited, from the last lines of their logs: the cluster's
// directory, and so its logs, goes with a bed that fails to start.
func (b *Bed) controllerLogTails(c *Cluster, names []string) string {
	var out strings.Builder
	for _, name := range names {
		fmt.Fprintf(&out, "the last lines of %s's log:\n%s\n", name, tail(filepath.Join(b.tools.clusterDir(c.Name), "logs", name+".log"), 5))
	}
	return strings.TrimSuffix(out.String(), "\n")
}

// exitedControllers are the cluster's startedControllers whose process does not run.
func (b *Bed) exitedControllers(c *Cluster) []string {
	var exited []string
	for _, name := range startedControllers {
		if pid, err := b.ComponentPID(c, name); err != nil || !processAlive(pid) {
			exited = append(exited, name)
		}
	}
	return exited
}
