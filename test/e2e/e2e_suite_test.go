package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/internal/ociimage"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
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
	// realNodeErr says why the bed has no real node (nil: it has one).
	realNodeErr error
	// secondaryRealNodesErr says why the secondaries have no real node (nil: each has one).
	secondaryRealNodesErr error
	// secondaryPodNetwork is how the secondaries' real nodes' pods reach each other and the
	// primary's: flat unless FLOTILLA_E2E_SECONDARY_POD_NETWORK=isolated.
	secondaryPodNetwork = testbed.PodNetworkFlat
)

// managerPodNetwork is the --pod-network of every manager the suite starts: flat where every
// cluster has a real node and the secondaries' pods reach each other and the primary's (the bed's
// default), so the specs about a flat network share the suite's manager and run beside the others
// instead of restarting it; isolated otherwise. The isolated network's proxy status is proved in
// the integration tier (test/integration/election).
func managerPodNetwork() testbed.PodNetwork {
	if secondaryPodNetwork == testbed.PodNetworkFlat && realNodeErr == nil && secondaryRealNodesErr == nil {
		return testbed.PodNetworkFlat
	}
	return testbed.PodNetworkIsolated
}

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	SetDefaultConsistentlyDuration(5 * time.Second)
	RunSpecs(t, "Flotilla e2e")
}

// The suite's set-up: the first parallel process starts the bed and the manager and hands the
// others what they need to use them (suiteHandle); every process then runs its share of the
// specs that may run in parallel, and the first runs the Serial ones after all of them. With one
// process it is the same set-up. Cleanups registered by the first process run once every
// process is done.
var _ = SynchronizedBeforeSuite(func(ctx SpecContext) []byte {
	startSuite(ctx)
	raw, err := json.Marshal(suiteHandle{Bed: bed.Handle(), WorkDir: workDir, ManagerBin: managerBin, CLIBin: cliBin,
		ManagerKubeconfig: managerKubeconfig, ManagerPID: manager.PID(), ManagerLog: manager.LogPath,
		ManagerProbeURL: manager.probeURL, ManagerMetricsURL: manager.metricsURL,
		RealNodeErr: errString(realNodeErr), SecondaryRealNodesErr: errString(secondaryRealNodesErr), SecondaryPodNetwork: secondaryPodNetwork})
	Expect(err).NotTo(HaveOccurred())
	return raw
}, func(ctx SpecContext, raw []byte) {
	if GinkgoParallelProcess() == 1 {
		return
	}
	var h suiteHandle
	Expect(json.Unmarshal(raw, &h)).To(Succeed())
	var err error
	bed, err = testbed.Attach(h.Bed, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	workDir, managerBin, cliBin, managerKubeconfig = h.WorkDir, h.ManagerBin, h.CLIBin, h.ManagerKubeconfig
	manager = &managerProcess{Process: testbed.AttachProcess("flotilla-manager", h.ManagerLog, h.ManagerPID),
		probeURL: h.ManagerProbeURL, metricsURL: h.ManagerMetricsURL}
	realNodeErr, secondaryRealNodesErr, secondaryPodNetwork = errFrom(h.RealNodeErr), errFrom(h.SecondaryRealNodesErr), h.SecondaryPodNetwork
	// The first process imported the application image into every real node.
	markAppImageImported()
}, NodeTimeout(10*time.Minute))

// suiteHandle is what the first parallel process hands the others.
type suiteHandle struct {
	Bed                                            testbed.Handle
	WorkDir, ManagerBin, CLIBin, ManagerKubeconfig string
	ManagerPID                                     int
	ManagerLog, ManagerProbeURL, ManagerMetricsURL string
	RealNodeErr, SecondaryRealNodesErr             string
	SecondaryPodNetwork                            testbed.PodNetwork
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func errFrom(s string) error {
	if s == "" {
		return nil
	}
	return errors.New(s)
}

// startSuite starts the bed and the manager: the first parallel process's set-up.
func startSuite(ctx SpecContext) {
	// Where the set-up's time goes, step by step, in the suite's output.
	began := time.Now()
	lap := func(step string) {
		GinkgoWriter.Printf("set-up: %s at %s\n", step, time.Since(began).Round(100*time.Millisecond))
	}
	// Two beds' clusters started at once on two cores miss their start deadlines: make e2e starts
	// the bed with real nodes once the other's clusters are up (or its set-up has failed), waiting
	// 5 minutes at most. The bed without real nodes goes first: its specs take longest.
	if after := os.Getenv("FLOTILLA_E2E_START_AFTER"); after != "" {
		GinkgoWriter.Printf("set-up: waiting for %s, written once the other bed's clusters are up\n", after)
		waitForFile(ctx, after, 5*time.Minute)
		began = time.Now()
		lap("the other bed's clusters are up")
	}
	markUp := func() {}
	if up := os.Getenv("FLOTILLA_E2E_UP_MARK"); up != "" {
		var once sync.Once
		markUp = func() { once.Do(func() { _ = os.WriteFile(up, nil, 0o600) }) }
		defer markUp() // a set-up that failed lets the other bed start too
	}
	var err error
	workDir, err = os.MkdirTemp("", "flotilla-e2e-")
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("e2e work dir: %s\n", workDir)

	managerBin = filepath.Join(workDir, "bin", "flotilla-manager")
	cliBin = filepath.Join(workDir, "bin", "flotillactl")
	// Built while the bed starts (kwokctl mostly waits on its clusters).
	built := make(chan error, 1)
	go func() {
		// Static, as make image builds it: the same binary runs on the host and in the image.
		build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Dir(managerBin)+"/", "./cmd/flotilla-manager", "./cmd/flotillactl")
		build.Dir = repoRoot()
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := build.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("building the manager and flotillactl: %w: %s", err, out)
		}
		built <- err
	}()

	// FLOTILLA_E2E_REAL_NODES=0: a bed without any real node, which changes nothing of the host
	// and so may run beside one that has them (make e2e runs the disruptive specs that need no
	// real node on such a bed, beside the rest).
	noRealNodes := os.Getenv("FLOTILLA_E2E_REAL_NODES") == "0"
	// One bed with real nodes per host: another one (another run's) is waited for before this
	// host is judged, else its real nodes would make ours look unavailable.
	if !noRealNodes {
		releaseBedLock, err := testbed.HoldBedLock(ctx, GinkgoWriter, testbed.BedLockWait)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(releaseBedLock)
	}
	// The real node (containerd, kubelet) runs the chart's manager as a pod where this host allows.
	realNodeErr = errors.New("left out: FLOTILLA_E2E_REAL_NODES=0")
	if !noRealNodes {
		realNodeErr = testbed.RealNodeAvailable()
	}
	if realNodeErr != nil {
		GinkgoWriter.Printf("no real node in the bed: %v\n", realNodeErr)
	}
	// Each secondary gets a real node too, where this host allows (root, Debian's containerd):
	// the real delegates' specs run there, and are skipped, saying why, without them
	// (FLOTILLA_E2E_SECONDARY_REAL_NODES=0 leaves them out). Their pod network is flat, so the
	// manager's --pod-network=flat is proved; FLOTILLA_E2E_SECONDARY_POD_NETWORK=isolated keeps
	// each secondary's pods to itself (make real-nodes proves both networks of the bed).
	secondaryRealNodesErr = errors.New("left out: FLOTILLA_E2E_SECONDARY_REAL_NODES=0")
	switch {
	case noRealNodes:
		secondaryRealNodesErr = errors.New("left out: FLOTILLA_E2E_REAL_NODES=0")
	case os.Getenv("FLOTILLA_E2E_SECONDARY_REAL_NODES") != "0":
		secondaryRealNodesErr = testbed.SecondaryRealNodesAvailable()
	}
	if v := os.Getenv("FLOTILLA_E2E_SECONDARY_POD_NETWORK"); v != "" {
		secondaryPodNetwork = testbed.PodNetwork(v)
	}
	if secondaryRealNodesErr != nil {
		GinkgoWriter.Printf("no real nodes in the secondaries: %v\n", secondaryRealNodesErr)
	}
	secondaryRealNodes := secondaryRealNodesErr == nil
	// The resizing CSI stack in secondary2, for the expansion spec of the stateful workloads, whose
	// groups run on the bed with real nodes.
	var resizableStorage []string
	if !noRealNodes {
		resizableStorage = []string{testbed.SecondaryName(2)}
	}
	// Pods in secondaries start within 2-4 s, not 2-12 s: specs wait on many.
	// The Kubernetes versions: $FLOTILLA_BED_VERSIONS, else the default mix (the newest primary),
	// or on the bed without real nodes the opposite one (a primary older than a secondary).
	var versions map[string]string
	if noRealNodes && os.Getenv(testbed.KubeVersionsEnv) == "" {
		versions = testbed.OppositeKubeVersions
	}
	bed, err = testbed.Start(ctx, testbed.Options{WorkDir: filepath.Join(workDir, "bed"), Log: GinkgoWriter, RealNode: realNodeErr == nil,
		SecondaryRealNodes: secondaryRealNodes, SecondaryPodNetwork: secondaryPodNetwork, AuditWrites: true,
		PodStartJitter: time.Second, Tracing: true, ResizableStorage: resizableStorage, KubeVersions: versions})
	Expect(err).NotTo(HaveOccurred())
	lap("the bed is up")
	markUp()
	// Registered first, so it runs last: after the manager is stopped, stop the bed and prove that
	// nothing the suite started is still running.
	DeferCleanup(func(ctx SpecContext) {
		// The primary's own nodes (fake and real, not virtual) were never NotReady in the whole run:
		// its ordinary pods never lost readiness to the bed itself.
		Expect(notReadyEvents(ctx, bed.Primary)).To(BeEmpty(), "the primary's own nodes went NotReady")
		pids := bed.PIDs()
		Expect(pids).NotTo(BeEmpty(), "the bed's processes should be known before stopping it")
		if manager != nil {
			pids = append(pids, manager.PID())
		}
		Expect(bed.Stop(ctx)).To(Succeed())
		for _, pid := range pids {
			Expect(testbed.ProcessAlive(pid)).To(BeFalse(), "pid %d still running after the suite", pid)
		}
		if _, err := os.Stat(filepath.Join(workDir, suiteFailedMark)); err == nil {
			suiteFailed = true
		}
		if !suiteFailed && os.Getenv("FLOTILLA_E2E_KEEP") == "" {
			Expect(os.RemoveAll(workDir)).To(Succeed())
		}
	}, NodeTimeout(3*time.Minute))

	Expect(<-built).To(Succeed())
	lap("the manager and flotillactl are built")

	if bed.RealNode != nil {
		image := filepath.Join(workDir, "flotilla-manager.tar")
		Expect(ociimage.WriteTarball(ociimage.Spec{Ref: managerImageRepo + ":" + managerImageTag, Entrypoint: "/flotilla-manager",
			User: "65532:65532", Binaries: map[string]string{"linux/" + runtime.GOARCH: managerBin}}, "linux/"+runtime.GOARCH, image)).To(Succeed())
		Expect(bed.RealNode.ImportImage(ctx, image)).To(Succeed())
		lap("the manager's image is in the primary's real node")
	}

	// The chart installs CRDs, ServiceAccount and RBAC; the manager runs here, out of cluster, as
	// that ServiceAccount, so every spec also proves the chart's RBAC is enough. The bed created the
	// Multi-Cluster Services CRDs already in every cluster with a real node (its CoreDNS lists
	// ServiceImports): the chart takes them over (the same CRDs, now Helm's to upgrade).
	// The namespace of the inventory's readers (inventory.consumerNamespaces): the chart gives the
	// manager a Role there.
	_, err = bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: inventoryReaders}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	// The primary's install is from the chart's archive, as a release ships it (make release runs
	// the same helm package); the secondaries' from the folder.
	out, err := helm(ctx, bed.Primary, "package", "charts/flotilla", "--destination", workDir)
	Expect(err).NotTo(HaveOccurred(), "helm package: %s", out)
	_, archive, found := strings.Cut(strings.TrimSpace(out), "saved it to: ")
	Expect(found).To(BeTrue(), "helm package: %s", out)
	out, err = helm(ctx, bed.Primary, slices.Concat([]string{"install", "flotilla", archive, "-n", "flotilla-system",
		"--create-namespace", "--wait", "--take-ownership"}, outOfClusterValues)...)
	Expect(err).NotTo(HaveOccurred(), "helm install (primary, from %s): %s", archive, out)
	// Without the lender: the specs of what a secondary lends start it themselves, as the process
	// the chart runs, against the secondary they need; a lender pod in every secondary would also
	// take room no capacity spec counts on.
	for _, s := range bed.Secondaries {
		out, err = helm(ctx, s, "install", "flotilla", "charts/flotilla", "-n", "flotilla-system",
			"--create-namespace", "--set", "role=secondary", "--set", "lender.enabled=false", "--take-ownership")
		Expect(err).NotTo(HaveOccurred(), "helm install (%s): %s", s.Name, out)
	}
	lap("the chart is installed in every cluster")
	// Where secondary2 has a real node, its agent can run there and hold a tunnel to the manager.
	if secondaryRealNodesErr == nil {
		setUpTunnel()
	}
	managerKubeconfig = filepath.Join(workDir, "manager.kubeconfig")
	Expect(serviceAccountKubeconfig(ctx, bed.Primary, "flotilla-system", "flotilla", managerKubeconfig)).To(Succeed())
	manager, err = startManager(managerBin, managerKubeconfig, filepath.Join(workDir, "manager.log"))
	Expect(err).NotTo(HaveOccurred())
	// The spec that restarts the manager replaces it: stop whichever runs at the end.
	DeferCleanup(func() { Expect(manager.Stop(20 * time.Second)).To(Succeed()) })
	// The application image in every real node once, before any process's specs run.
	lap("the manager runs")
	if secondaryRealNodesErr == nil {
		importAppImage(ctx, bed.RealNode != nil)
		lap("the application image is in every real node")
	}
}

// waitForFile returns once path exists, the context ends or limit has passed, whichever is first.
func waitForFile(ctx context.Context, path string, limit time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			GinkgoWriter.Printf("set-up: %s not written within %s; starting anyway\n", path, limit)
			return
		case <-tick.C:
		}
	}
}

// tracingArgs send the manager's spans to the bed's Jaeger (every manager the suite starts).
func tracingArgs() []string {
	if bed.Jaeger == nil {
		return nil
	}
	return []string{"--tracing-endpoint", bed.Jaeger.OTLPEndpoint}
}

// outOfClusterValues are the primary's chart values while the manager runs on the host: CRDs,
// ServiceAccount and RBAC, with the rights of Replicators (and of a custom kind of theirs) and of
// Multi-Cluster Services.
var outOfClusterValues = []string{"--set", "manager.enabled=false", "--set", "replicator.enabled=true", "--set", "replicator.kinds={" + widgetDefinition + "}",
	"--set", "multiclusterServices.enabled=true", "--set", "inventory.consumerNamespaces={" + inventoryReaders + "}"}

// suiteFailed keeps the work dir (logs, kubeconfigs) of a run with a failure; a failure in any
// parallel process leaves suiteFailedMark in the work dir.
var suiteFailed bool

const suiteFailedMark = "failed"

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() {
		suiteFailed = true
		// For the first process's cleanup, whichever process failed.
		if workDir != "" {
			_ = os.WriteFile(filepath.Join(workDir, suiteFailedMark), nil, 0o600)
		}
		logs := filepath.Join(workDir, "cluster-logs", fmt.Sprintf("spec-%d", r.LeafNodeLocation.LineNumber))
		if bed != nil {
			if err := bed.SaveLogs(logs); err != nil {
				GinkgoWriter.Printf("saving the clusters' logs: %v\n", err)
			}
		}
		GinkgoWriter.Printf("spec failed; work dir kept: %s (clusters' logs in %s)\n", workDir, logs)
	}
})

// notReadyEvents lists the NodeNotReady Events of a cluster's nodes other than Flotilla's virtual ones.
func notReadyEvents(ctx context.Context, c *testbed.Cluster) []string {
	evs, err := c.Clientset.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=NodeNotReady,involvedObject.kind=Node"})
	Expect(err).NotTo(HaveOccurred())
	var found []string
	for _, e := range evs.Items {
		if !strings.HasPrefix(e.InvolvedObject.Name, flotillav1.VirtualNodePrefix) {
			found = append(found, fmt.Sprintf("%s at %s: %s", e.InvolvedObject.Name, e.LastTimestamp.Format(time.RFC3339), e.Message))
		}
	}
	return found
}

// repoRoot is the module's root, two levels above this file.
func repoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		Fail("cannot locate the repository")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}
