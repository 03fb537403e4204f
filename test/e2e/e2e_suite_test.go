package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flotilla-dev/flotilla/test/testbed"
)

// The suite's shared state: one bed and one manager for every spec.
var (
	bed        *testbed.Bed
	manager    *managerProcess
	workDir    string
	managerBin string
	cliBin     string
	// managerKubeconfig reaches the primary as the chart's ServiceAccount.
	managerKubeconfig string
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	SetDefaultConsistentlyDuration(5 * time.Second)
	RunSpecs(t, "Flotilla e2e")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	var err error
	workDir, err = os.MkdirTemp("", "flotilla-e2e-")
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("e2e work dir: %s\n", workDir)

	managerBin = filepath.Join(workDir, "bin", "flotilla-manager")
	cliBin = filepath.Join(workDir, "bin", "flotillactl")
	for bin, pkg := range map[string]string{managerBin: "./cmd/flotilla-manager", cliBin: "./cmd/flotillactl"} {
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
		build.Dir = repoRoot()
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "building %s: %s", pkg, out)
	}

	bed, err = testbed.Start(ctx, testbed.Options{WorkDir: filepath.Join(workDir, "bed"), Log: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	// Registered first, so it runs last: after the manager is stopped, stop the bed and prove that
	// nothing the suite started is still running.
	DeferCleanup(func(ctx SpecContext) {
		pids := bed.PIDs()
		Expect(pids).NotTo(BeEmpty(), "the bed's processes should be known before stopping it")
		if manager != nil {
			pids = append(pids, manager.PID())
		}
		Expect(bed.Stop(ctx)).To(Succeed())
		for _, pid := range pids {
			Expect(testbed.ProcessAlive(pid)).To(BeFalse(), "pid %d still running after the suite", pid)
		}
		if !suiteFailed && os.Getenv("FLOTILLA_E2E_KEEP") == "" {
			Expect(os.RemoveAll(workDir)).To(Succeed())
		}
	}, NodeTimeout(3*time.Minute))

	// The chart installs CRDs, ServiceAccount and RBAC; the manager runs here, out of cluster, as
	// that ServiceAccount, so every spec also proves the chart's RBAC is enough.
	out, err := helm(ctx, bed.Primary, "install", "flotilla", "charts/flotilla", "-n", "flotilla-system",
		"--create-namespace", "--set", "manager.enabled=false", "--wait")
	Expect(err).NotTo(HaveOccurred(), "helm install (primary): %s", out)
	out, err = helm(ctx, bed.Secondaries[0], "install", "flotilla", "charts/flotilla", "-n", "flotilla-system",
		"--create-namespace", "--set", "role=secondary")
	Expect(err).NotTo(HaveOccurred(), "helm install (secondary): %s", out)
	managerKubeconfig = filepath.Join(workDir, "manager.kubeconfig")
	Expect(serviceAccountKubeconfig(ctx, bed.Primary, "flotilla-system", "flotilla", managerKubeconfig)).To(Succeed())
	manager, err = startManager(managerBin, managerKubeconfig, filepath.Join(workDir, "manager.log"))
	Expect(err).NotTo(HaveOccurred())
	// The spec that restarts the manager replaces it: stop whichever runs at the end.
	DeferCleanup(func() { Expect(manager.Stop(20 * time.Second)).To(Succeed()) })
}, NodeTimeout(10*time.Minute))

// suiteFailed keeps the work dir (logs, kubeconfigs) of a run with a failure.
var suiteFailed bool

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() {
		suiteFailed = true
		logs := filepath.Join(workDir, "cluster-logs", fmt.Sprintf("spec-%d", r.LeafNodeLocation.LineNumber))
		if bed != nil {
			if err := bed.SaveLogs(logs); err != nil {
				GinkgoWriter.Printf("saving the clusters' logs: %v\n", err)
			}
		}
		GinkgoWriter.Printf("spec failed; work dir kept: %s (clusters' logs in %s)\n", workDir, logs)
	}
})

// repoRoot is the module's root, two levels above this file.
func repoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		Fail("cannot locate the repository")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}
