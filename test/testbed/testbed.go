package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Role says what a cluster of the bed is for.
type Role string

const (
	// RolePrimary is the cluster users talk to and where Flotilla's manager runs.
	RolePrimary Role = "primary"
	// RoleSecondary is a cluster that runs delegates and replicated resources.
	RoleSecondary Role = "secondary"

	// PrimaryName is the primary's cluster and context name.
	PrimaryName = "primary"
	// FakeNodeAnnotation marks the nodes kwok manages (it leaves every other node alone).
	FakeNodeAnnotation = "kwok.x-k8s.io/node"
)

// SecondaryName is the cluster and context name of the i-th secondary (1-based).
func SecondaryName(i int) string { return fmt.Sprintf("secondary%d", i) }

// Options says what bed to start. Zero values take the defaults documented on each field.
type Options struct {
	// WorkDir holds everything of this bed: kwokctl's state, PKI, logs, kubeconfigs. Required.
	WorkDir string
	// ToolsDir holds the binaries `make tools` builds. Default: $FLOTILLA_TOOLS_DIR, else what
	// test/tools/install.sh print-dir says.
	ToolsDir string
	// Secondaries is how many secondary clusters to start. Default 2; 0 is allowed with NoSecondaries.
	Secondaries int
	// NoSecondaries starts the primary alone.
	NoSecondaries bool
	// NodesPerSecondary is how many fake nodes each secondary gets. Default 2.
	NodesPerSecondary int
	// PrimaryNodes is how many fake nodes the primary gets, so that its node-lifecycle controller
	// does not enter full-disruption mode when every virtual node is NotReady. Default 1.
	PrimaryNodes int
	// Node sizes fake nodes. Default 32 CPUs, 256Gi memory, 500 pods.
	Node NodeSize
	// NodeMonitorGracePeriod is the primary kube-controller-manager's node monitor grace period,
	// which bounds how fast a virtual node whose lease lapses turns Unknown. Default 20s.
	NodeMonitorGracePeriod time.Duration
	// AuditWrites makes each secondary's API server log every write (create, update, patch,
	// delete) with its user, verb and object, but Events and Leases, to Cluster.AuditLogPath:
	// specs that count who wrote what in a secondary read it.
	AuditWrites bool
	// PodStartJitter is the random part of each of kwok's two delays before a pod in a secondary
	// runs (pod-create, then pod-ready, each 1 s plus up to this). Default 5s, kwok's own.
	PodStartJitter time.Duration
	// NoMetricsServer leaves out each cluster's metrics-server (metrics.k8s.io): about 30 MiB and
	// a scrape every 10 s per cluster that a bed of many secondaries for `make bench` does not use.
	NoMetricsServer bool
	// NoVolumeProvisioner leaves out each secondary's local-path-provisioner and its default
	// StorageClass (StorageClassLocalPath): about 30 MiB per secondary that a bed without
	// PersistentVolumeClaims does not use.
	NoVolumeProvisioner bool
	// ResizableStorage names the secondaries (SecondaryName) that also run the resizing CSI stack
	// (csi.go): StorageClassResizable, whose claims are expanded. About 60 MiB per secondary.
	ResizableStorage []string
	// RealNode gives the primary one real node (RealNodeName) besides its fake ones: containerd,
	// a kubelet and kube-proxy on this host, which must be root (RealNodeAvailable says whether
	// it can). It is tainted RealNodeKey=true:NoSchedule. Stop or StopDir restore the host.
	RealNode bool
	// SecondaryRealNodes gives each secondary one real node (<secondary>-real) besides its fake
	// ones, each in a network namespace of its own (fl-<secondary>) with its own containerd,
	// kubelet, kube-proxy, bridge and pod range; tainted and labelled RealNodeKey=true as the
	// primary's. Root only (SecondaryRealNodesAvailable says whether this host can). Stop or
	// StopDir restore the host.
	SecondaryRealNodes bool
	// KubeVersions is the Kubernetes version of each cluster by name (v1.34.4); a cluster not
	// named runs test/tools' KUBE_VERSION. Nil: $FLOTILLA_BED_VERSIONS, else DefaultKubeVersions.
	KubeVersions map[string]string
	// SecondaryPodNetwork says how the pods of the secondaries' real nodes reach each other:
	// PodNetworkIsolated (the default) not at all, each node's pods NATed behind its node IP;
	// PodNetworkFlat through the host, which routes each node's pod range to it and forwards
	// (net.ipv4.ip_forward=1 while the bed runs), pods keeping their own addresses.
	SecondaryPodNetwork PodNetwork
	// Tracing gives the bed a tracing backend (Jaeger, Bed.Jaeger) and has every API server send
	// it a span of every request (jaeger.go).
	Tracing bool
	// StartTimeout bounds the start of each cluster, its readiness and its nodes. Default 3m.
	StartTimeout time.Duration
	// Log receives progress lines. Default: discarded.
	Log io.Writer
}

// PodNetwork is how the pods of the secondaries' real nodes reach each other.
type PodNetwork string

const (
	// PodNetworkIsolated keeps each secondary real node's pods to itself.
	PodNetworkIsolated PodNetwork = "isolated"
	// PodNetworkFlat routes between the secondary real nodes' pod ranges through the host.
	PodNetworkFlat PodNetwork = "flat"
)

// Cluster is one running cluster of the bed.
type Cluster struct {
	// Name is the kwokctl cluster name and the context name in the bed's kubeconfig.
	Name string
	// Role is primary or secondary.
	Role Role
	// KubeconfigPath is a self-contained kubeconfig with this cluster only, context Name.
	KubeconfigPath string
	// RESTConfig reaches the cluster as its admin.
	RESTConfig *rest.Config
	// Clientset is a typed client built from RESTConfig.
	Clientset kubernetes.Interface
	// Nodes are the names of the fake nodes created in this cluster.
	Nodes []string
	// RealNode is a secondary's real node, nil unless Options.SecondaryRealNodes (the primary's
	// is Bed.RealNode).
	RealNode *SecondaryRealNode
	// DNSServiceIP is the ClusterIP of kube-system/kube-dns, the cluster DNS (CoreDNS, dns.go) that
	// the pods of the cluster's real node use; empty in a cluster without a real node.
	DNSServiceIP string
	// ResizableStorage says the secondary runs the resizing CSI stack (Options.ResizableStorage).
	ResizableStorage bool
	// KubeVersion is the Kubernetes version its control plane runs ("": test/tools' KUBE_VERSION),
	// and its real node's kubelet where test/tools builds that version's (Options.KubeVersions).
	KubeVersion string

	dir     string // kwokctl's folder for this cluster
	dnsAddr string // the host address where CoreDNS listens, one the real node's pods reach
}

// Bed is a running set of clusters.
type Bed struct {
	// WorkDir is the bed's folder.
	WorkDir string
	// KubeconfigPath holds one context per cluster, named as the clusters; current context primary.
	KubeconfigPath string
	// Primary is the primary cluster.
	Primary *Cluster
	// Secondaries are the secondary clusters, in order.
	Secondaries []*Cluster
	// RealNode is the primary's real node, nil unless Options.RealNode.
	RealNode *RealNode
	// SecondaryRealNodes are the secondaries' real nodes, in the secondaries' order; empty unless
	// Options.SecondaryRealNodes.
	SecondaryRealNodes []*SecondaryRealNode
	// Jaeger is the tracing backend, nil unless Options.Tracing.
	Jaeger *Jaeger

	tools kwokctl
	log   io.Writer
	// noMetrics: Options.NoMetricsServer.
	noMetrics bool
	// noVolumes: Options.NoVolumeProvisioner.
	noVolumes bool
	// releaseBedLock gives back the bed lock a bed with real nodes holds (HoldBedLock); nil otherwise.
	releaseBedLock func()
	// creating serialises kwokctl create: concurrent ones pick the same "free" ports and their
	// components then answer each other's clients (seen as x509 errors against another kwok-ca).
	creating sync.Mutex
}

// Clusters returns the primary followed by the secondaries.
func (b *Bed) Clusters() []*Cluster { return append([]*Cluster{b.Primary}, b.Secondaries...) }

func (o *Options) defaults() error {
	if o.WorkDir == "" {
		return errors.New("testbed: Options.WorkDir is required")
	}
	abs, err := filepath.Abs(o.WorkDir)
	if err != nil {
		return fmt.Errorf("resolving work dir %s: %w", o.WorkDir, err)
	}
	o.WorkDir = abs
	if o.Secondaries == 0 && !o.NoSecondaries {
		o.Secondaries = 2
	}
	if o.NodesPerSecondary == 0 {
		o.NodesPerSecondary = 2
	}
	if o.PrimaryNodes == 0 {
		o.PrimaryNodes = 1
	}
	o.Node.defaults()
	if o.NodeMonitorGracePeriod == 0 {
		o.NodeMonitorGracePeriod = 20 * time.Second
	}
	if o.PodStartJitter == 0 {
		o.PodStartJitter = kwokStartJitter
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 3 * time.Minute
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	switch o.SecondaryPodNetwork {
	case "":
		o.SecondaryPodNetwork = PodNetworkIsolated
	case PodNetworkIsolated, PodNetworkFlat:
	default:
		return fmt.Errorf("testbed: unknown SecondaryPodNetwork %q (isolated or flat)", o.SecondaryPodNetwork)
	}
	names := make([]string, 0, o.Secondaries)
	for i := 1; i <= o.Secondaries; i++ {
		names = append(names, SecondaryName(i))
	}
	for _, name := range o.ResizableStorage {
		if !slices.Contains(names, name) {
			return fmt.Errorf("testbed: ResizableStorage names %q, which is not one of the secondaries (%s)", name, strings.Join(names, ", "))
		}
	}
	return nil
}

// Start starts a primary and the secondaries, waits until every API server is ready and every fake
// node is Ready, and writes the bed's kubeconfig. On error, whatever was started is stopped again.
func Start(ctx context.Context, opts Options) (*Bed, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	tools, err := findTools(opts.ToolsDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.WorkDir, 0o750); err != nil {
		return nil, fmt.Errorf("creating work dir: %w", err)
	}
	bed := &Bed{
		WorkDir:        opts.WorkDir,
		KubeconfigPath: filepath.Join(opts.WorkDir, "kubeconfig"),
		tools:          tools.withWorkDir(filepath.Join(opts.WorkDir, "kwok")),
		log:            opts.Log,
		noMetrics:      opts.NoMetricsServer,
		noVolumes:      opts.NoVolumeProvisioner,
	}
	versions, err := kubeVersions(opts, tools.toolsDir)
	if err != nil {
		return nil, err
	}
	bed.Primary = &Cluster{Name: PrimaryName, Role: RolePrimary, KubeVersion: versions[PrimaryName]}
	for i := 1; i <= opts.Secondaries; i++ {
		name := SecondaryName(i)
		bed.Secondaries = append(bed.Secondaries, &Cluster{Name: name, Role: RoleSecondary, KubeVersion: versions[name]})
	}
	if err := bed.planRealNodes(ctx, opts, tools.toolsDir); err != nil {
		bed.release()
		return nil, err
	}

	started := time.Now()
	if opts.Tracing {
		// First: the API servers are configured to send it their spans.
		if err := bed.startJaeger(ctx); err != nil {
			stopErr := bed.Stop(context.WithoutCancel(ctx))
			return nil, errors.Join(err, stopErr)
		}
	}
	if err := bed.startAll(ctx, opts); err != nil {
		stopErr := bed.Stop(context.WithoutCancel(ctx))
		return nil, errors.Join(err, stopErr)
	}
	if err := bed.writeKubeconfig(); err != nil {
		stopErr := bed.Stop(context.WithoutCancel(ctx))
		return nil, errors.Join(err, stopErr)
	}
	fmt.Fprintf(opts.Log, "testbed: %d clusters ready in %s, kubeconfig %s\n",
		len(bed.Clusters()), time.Since(started).Round(100*time.Millisecond), bed.KubeconfigPath)
	return bed, nil
}

// planRealNodes checks the host can have the real nodes asked for, takes the bed lock (another
// bed's real nodes would share its iptables, cgroups and containerd state) and picks their
// networks from what the host uses now.
func (b *Bed) planRealNodes(ctx context.Context, opts Options, toolsDir string) error {
	secondaries := opts.SecondaryRealNodes && len(b.Secondaries) > 0
	if opts.RealNode {
		if err := RealNodeAvailableIn(toolsDir); err != nil {
			return err
		}
	}
	if secondaries {
		if err := SecondaryRealNodesAvailableIn(toolsDir); err != nil {
			return err
		}
	}
	if !opts.RealNode && !secondaries {
		return nil
	}
	var err error
	if b.releaseBedLock, err = HoldBedLock(ctx, opts.Log, BedLockWait); err != nil {
		return err
	}
	if opts.RealNode {
		if b.RealNode, err = planRealNode(opts.WorkDir, toolsDir, opts.Log); err != nil {
			return fmt.Errorf("planning the real node: %w", err)
		}
		if b.Primary.DNSServiceIP, err = dnsServiceIP(b.RealNode.ServiceCIDR); err != nil {
			return err
		}
		b.Primary.dnsAddr = b.RealNode.HostIP
	}
	if secondaries {
		if b.SecondaryRealNodes, err = planSecondaryRealNodes(opts.WorkDir, toolsDir, b.Secondaries, b.RealNode, opts.Log); err != nil {
			return fmt.Errorf("planning the secondaries' real nodes: %w", err)
		}
		for i, n := range b.SecondaryRealNodes {
			c := b.Secondaries[i]
			c.RealNode = n
			n.flat = opts.SecondaryPodNetwork == PodNetworkFlat
			if c.DNSServiceIP, err = dnsServiceIP(secondaryServiceCIDR); err != nil {
				return err
			}
			// The host's end of the veth: the claim creates it before the cluster starts.
			c.dnsAddr = n.HostIP
		}
	}
	return nil
}

// release gives back the bed lock, if the bed holds it.
func (b *Bed) release() {
	if b.releaseBedLock != nil {
		b.releaseBedLock()
	}
}

// startAll brings the clusters up concurrently: each is an independent set of processes. The
// real node's containerd and images come up alongside; its kubelet joins the primary once that runs.
func (b *Bed) startAll(ctx context.Context, opts Options) error {
	var wg sync.WaitGroup
	errs := make([]error, len(b.Clusters())+1+len(b.SecondaryRealNodes))
	if b.RealNode != nil {
		// Its kwokctl config must exist before the primary is created; the rest overlaps. It
		// claims the host first, so that its snapshot predates what the secondaries' nodes create.
		if err := b.RealNode.prepareFiles(); err != nil {
			return err
		}
		if err := b.RealNode.claimHost(ctx); err != nil {
			return err
		}
		wg.Go(func() {
			if err := b.RealNode.prepare(ctx); err != nil {
				errs[len(errs)-1] = fmt.Errorf("preparing the real node: %w", err)
			}
		})
	}
	if len(b.SecondaryRealNodes) > 0 {
		pause := sync.OnceValues(func() (string, error) { return buildPauseImage(ctx, filepath.Join(b.WorkDir, "images")) })
		// The application image is in every secondary real node: the volume provisioner's helper
		// pods run it (localpath.go), and so can any spec without importing it first.
		app := sync.OnceValues(func() (string, error) { return BuildTestAppImage(ctx, filepath.Join(b.WorkDir, "images")) })
		for i, n := range b.SecondaryRealNodes {
			if err := n.prepareFiles(); err != nil {
				return err
			}
			// Claims one after the other (each takes the host lock), the rest overlaps.
			if err := n.claim(ctx); err != nil {
				return fmt.Errorf("claiming the host for %s: %w", n.Name, err)
			}
			wg.Go(func() {
				if err := n.prepare(ctx, pause, app); err != nil {
					errs[len(b.Clusters())+1+i] = fmt.Errorf("preparing %s: %w", n.Name, err)
				}
			})
		}
	}
	for i, c := range b.Clusters() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
			defer cancel()
			if err := b.startCluster(cctx, c, opts); err != nil {
				errs[i] = fmt.Errorf("starting cluster %s: %w", c.Name, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	jctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	joinErrs := make([]error, len(b.SecondaryRealNodes)+1)
	if b.RealNode != nil {
		wg.Go(func() {
			ca := filepath.Join(b.tools.clusterDir(b.Primary.Name), "pki", "ca.crt")
			if err := b.RealNode.join(jctx, b.Primary, ca); err != nil {
				joinErrs[0] = fmt.Errorf("joining the real node to the primary: %w", err)
			}
		})
	}
	for i, n := range b.SecondaryRealNodes {
		c := b.Secondaries[i]
		wg.Go(func() {
			ca := filepath.Join(b.tools.clusterDir(c.Name), "pki", "ca.crt")
			if err := n.join(jctx, c, ca); err != nil {
				joinErrs[i+1] = fmt.Errorf("joining %s to %s: %w", n.Name, c.Name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(joinErrs...)
}

func (b *Bed) startCluster(ctx context.Context, c *Cluster, opts Options) error {
	c.dir = b.tools.clusterDir(c.Name)
	rawKubeconfig := filepath.Join(b.WorkDir, "kwokctl-"+c.Name+".kubeconfig")
	b.creating.Lock()
	var rn *RealNode
	if c.Role == RolePrimary {
		rn = b.RealNode
	}
	err := b.tools.createCluster(ctx, c, rawKubeconfig, opts, rn, b.log)
	b.creating.Unlock()
	if err != nil {
		return err
	}
	if err := c.loadKubeconfig(rawKubeconfig, filepath.Join(b.WorkDir, c.Name+".kubeconfig")); err != nil {
		return err
	}
	if err := waitReady(ctx, c); err != nil {
		return err
	}
	if err := b.restartExitedControllers(ctx, c); err != nil {
		return err
	}
	nodes := opts.PrimaryNodes
	if c.Role == RoleSecondary {
		if err := setUpSecondary(ctx, c, b.tools, b.WorkDir, opts.PodStartJitter); err != nil {
			return err
		}
		nodes = opts.NodesPerSecondary
	}
	if err := createFakeNodes(ctx, c, nodes, opts.Node); err != nil {
		return err
	}
	if err := waitNodesReady(ctx, c); err != nil {
		return err
	}
	var with []string
	if c.DNSServiceIP != "" {
		// Before the real node joins: its kubelet's pods and kube-proxy's rules expect it.
		if err := b.startClusterDNS(ctx, c); err != nil {
			return err
		}
		with = append(with, "cluster DNS "+c.DNSServiceIP)
	}
	if !opts.NoMetricsServer {
		if err := b.startMetricsServer(ctx, c); err != nil {
			return err
		}
		with = append(with, "metrics.k8s.io")
	}
	if c.Role == RoleSecondary && !opts.NoVolumeProvisioner {
		if err := b.startLocalPath(ctx, c); err != nil {
			return err
		}
		with = append(with, "StorageClass "+StorageClassLocalPath)
	}
	if c.Role == RoleSecondary && slices.Contains(opts.ResizableStorage, c.Name) {
		c.ResizableStorage = true
		if err := b.startCSI(ctx, c); err != nil {
			return err
		}
		with = append(with, "StorageClass "+StorageClassResizable)
	}
	fmt.Fprintf(b.log, "testbed: cluster %s ready with %d fake nodes%s\n", c.Name, len(c.Nodes), strings.Join(append([]string{""}, with...), ", "))
	return nil
}

// loadKubeconfig renames kwokctl's kwok-NAME entries to NAME, embeds the certificate files and
// writes the result, so the file works wherever it is copied.
func (c *Cluster) loadKubeconfig(from, to string) error {
	cfg, err := clientcmd.LoadFromFile(from)
	if err != nil {
		return fmt.Errorf("reading kubeconfig %s: %w", from, err)
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return fmt.Errorf("embedding kubeconfig files: %w", err)
	}
	kwokName := "kwok-" + c.Name
	ctxEntry, ok := cfg.Contexts[kwokName]
	if !ok {
		return fmt.Errorf("kubeconfig %s has no context %s", from, kwokName)
	}
	out := clientcmdapi.NewConfig()
	out.Clusters[c.Name] = cfg.Clusters[ctxEntry.Cluster]
	out.AuthInfos[c.Name] = cfg.AuthInfos[ctxEntry.AuthInfo]
	out.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name}
	out.CurrentContext = c.Name
	if out.Clusters[c.Name] == nil || out.AuthInfos[c.Name] == nil {
		return fmt.Errorf("kubeconfig %s: context %s names a missing cluster or user", from, kwokName)
	}
	if err := clientcmd.WriteToFile(*out, to); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", to, err)
	}
	return c.useKubeconfig(out, to)
}

// loadKubeconfigFile takes the cluster's own kubeconfig, as loadKubeconfig wrote it.
func (c *Cluster) loadKubeconfigFile(path string) error {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return fmt.Errorf("reading kubeconfig %s: %w", path, err)
	}
	return c.useKubeconfig(cfg, path)
}

// useKubeconfig builds the cluster's clients from its kubeconfig (at path).
func (c *Cluster) useKubeconfig(cfg *clientcmdapi.Config, path string) error {
	c.KubeconfigPath = path
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("building REST config for %s: %w", c.Name, err)
	}
	// The bed is local and tests create many objects quickly; client-go's 5/10 would be the bottleneck.
	rc.QPS, rc.Burst = 200, 400
	c.RESTConfig = rc
	if c.Clientset, err = kubernetes.NewForConfig(rc); err != nil {
		return fmt.Errorf("building clientset for %s: %w", c.Name, err)
	}
	return nil
}

// writeKubeconfig merges the clusters' kubeconfigs, current context primary.
func (b *Bed) writeKubeconfig() error {
	merged := clientcmdapi.NewConfig()
	for _, c := range b.Clusters() {
		cfg, err := clientcmd.LoadFromFile(c.KubeconfigPath)
		if err != nil {
			return fmt.Errorf("reading kubeconfig of %s: %w", c.Name, err)
		}
		merged.Clusters[c.Name] = cfg.Clusters[c.Name]
		merged.AuthInfos[c.Name] = cfg.AuthInfos[c.Name]
		merged.Contexts[c.Name] = cfg.Contexts[c.Name]
	}
	merged.CurrentContext = b.Primary.Name
	if err := clientcmd.WriteToFile(*merged, b.KubeconfigPath); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", b.KubeconfigPath, err)
	}
	return nil
}

// Stop stops every cluster of the bed and makes sure none of their processes is left running.
// A real node goes first, while the primary can still delete its pods, and the host is restored.
func (b *Bed) Stop(ctx context.Context) error {
	errs := stopSecondaryRealNodes(ctx, b.WorkDir, b.log)
	if b.RealNode != nil {
		errs = append(errs, b.RealNode.stop(ctx))
	}
	for _, c := range b.Clusters() {
		if err := b.tools.deleteCluster(ctx, c.Name, b.log); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, stopJaeger(b.WorkDir))
	if b.releaseBedLock != nil { // drops are made by the one bed with real nodes, not by one beside it
		errs = append(errs, liftAllDrops(ctx))
	}
	b.release()
	return errors.Join(errs...)
}

// PIDs returns the PIDs of the bed's processes that are still running.
func (b *Bed) PIDs() []int {
	var pids []int
	for _, c := range b.Clusters() {
		pids = append(pids, alive(readPIDs(b.tools.clusterDir(c.Name)))...)
	}
	if b.RealNode != nil {
		pids = append(pids, b.RealNode.PIDs()...)
	}
	for _, n := range b.SecondaryRealNodes {
		pids = append(pids, n.PIDs()...)
	}
	if pid := readPIDFile(jaegerPIDFile(b.WorkDir)); pid != 0 {
		pids = append(pids, alive([]int{pid})...)
	}
	return pids
}

// stopSecondaryRealNodes tears down, concurrently, every secondary real node whose state is under
// workDir (realnode-<secondary>/).
func stopSecondaryRealNodes(ctx context.Context, workDir string, log io.Writer) []error {
	dirs, _ := filepath.Glob(filepath.Join(workDir, "realnode-*"))
	errs := make([]error, len(dirs))
	var wg sync.WaitGroup
	for i, d := range dirs {
		wg.Go(func() { errs[i] = stopSecondaryRealNodeDir(ctx, d, log) })
	}
	wg.Wait()
	return errs
}

// StopDir stops every cluster recorded under a bed's work dir, for a bed whose Bed value is gone
// (make dev-down, or the leftovers of an interrupted run). A dir with no clusters is not an error.
func StopDir(ctx context.Context, workDir, toolsDir string, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	tools, err := findTools(toolsDir)
	if err != nil {
		return err
	}
	tools = tools.withWorkDir(filepath.Join(workDir, "kwok"))
	// Real nodes first, while their clusters may still delete their pods; then the host is restored.
	errs := stopSecondaryRealNodes(ctx, workDir, log)
	if err := stopRealNodeDir(ctx, filepath.Join(workDir, "realnode"), log); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, stopJaeger(workDir))
	if nodes, _ := filepath.Glob(filepath.Join(workDir, "realnode*")); len(nodes) > 0 {
		errs = append(errs, liftAllDrops(ctx))
	}
	entries, err := os.ReadDir(filepath.Join(workDir, "kwok", "clusters"))
	if errors.Is(err, os.ErrNotExist) {
		return errors.Join(errs...)
	}
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("listing clusters in %s: %w", workDir, err))...)
	}
	for _, e := range entries {
		if e.IsDir() {
			errs = append(errs, tools.deleteCluster(ctx, e.Name(), log))
		}
	}
	return errors.Join(errs...)
}

// Check says whether every context of a bed's kubeconfig answers /readyz.
func Check(ctx context.Context, kubeconfigPath string) error {
	cfg, err := clientcmd.LoadFromFile(kubeconfigPath)
	if err != nil {
		return fmt.Errorf("reading %s: %w", kubeconfigPath, err)
	}
	var errs []error
	for name := range cfg.Contexts {
		rc, err := clientcmd.NewNonInteractiveClientConfig(*cfg, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
		if err != nil {
			errs = append(errs, fmt.Errorf("context %s: %w", name, err))
			continue
		}
		rc.Timeout = 5 * time.Second
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			errs = append(errs, fmt.Errorf("context %s: %w", name, err))
			continue
		}
		if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
			errs = append(errs, fmt.Errorf("context %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// SaveLogs copies every cluster's component logs (kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok, etcd, and the bed's own: metrics-server, CoreDNS...) to dir/<cluster>/,
// and the real node's (containerd, kubelet, kube-proxy) to dir/realnode/, so that they outlive
// the bed.
func (b *Bed) SaveLogs(dir string) error {
	for _, c := range b.Clusters() {
		if err := copyLogs(filepath.Join(b.tools.clusterDir(c.Name), "logs"), filepath.Join(dir, c.Name)); err != nil {
			return fmt.Errorf("saving the logs of %s: %w", c.Name, err)
		}
	}
	if b.RealNode != nil {
		if err := copyLogs(filepath.Join(b.RealNode.Dir, "logs"), filepath.Join(dir, RealNodeName)); err != nil {
			return fmt.Errorf("saving the logs of the real node: %w", err)
		}
	}
	for _, n := range b.SecondaryRealNodes {
		if err := copyLogs(filepath.Join(n.Dir, "logs"), filepath.Join(dir, n.Name)); err != nil {
			return fmt.Errorf("saving the logs of %s: %w", n.Name, err)
		}
	}
	return nil
}

func copyLogs(src, dst string) error {
	files, err := filepath.Glob(filepath.Join(src, "*.log"))
	if err != nil {
		return fmt.Errorf("listing %s: %w", src, err)
	}
	if err := os.MkdirAll(dst, 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", dst, err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("reading %s: %w", f, err)
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), raw, 0o600); err != nil {
			return fmt.Errorf("writing a copy of %s: %w", f, err)
		}
	}
	return nil
}

// AuditLogPath is the file where a secondary's API server logs the writes it served, one JSON
// audit event per line (Options.AuditWrites).
func (c *Cluster) AuditLogPath() string { return filepath.Join(c.dir, "logs", "audit.log") }
