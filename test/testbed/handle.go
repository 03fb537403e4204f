package testbed

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
)

// Handle is what another process needs to use a bed this process started: Ginkgo's parallel
// processes share the one bed the first process starts (SynchronizedBeforeSuite), as
// cluster-api's e2e suite shares its management cluster. It names files of the bed (kubeconfigs,
// its folders) and holds no credential of its own; it round-trips through JSON.
type Handle struct {
	WorkDir        string          `json:"workDir"`
	KubeconfigPath string          `json:"kubeconfig"`
	ToolsDir       string          `json:"toolsDir"`
	Clusters       []ClusterHandle `json:"clusters"`
	// RealNode is the primary's real node as a description (name, addresses, folder).
	RealNode *RealNode `json:"realNode,omitempty"`
	Jaeger   *Jaeger   `json:"jaeger,omitempty"`
	// NoMetrics and NoVolumes: the bed's Options.NoMetricsServer and NoVolumeProvisioner.
	NoMetrics bool `json:"noMetrics,omitempty"`
	NoVolumes bool `json:"noVolumes,omitempty"`
}

// ClusterHandle is one cluster of a Handle.
type ClusterHandle struct {
	Name           string   `json:"name"`
	Role           Role     `json:"role"`
	KubeconfigPath string   `json:"kubeconfig"`
	Nodes          []string `json:"nodes,omitempty"`
	DNSServiceIP   string   `json:"dnsServiceIP,omitempty"`
	// ResizableStorage: the secondary runs the resizing CSI stack.
	ResizableStorage bool `json:"resizableStorage,omitempty"`
	// RealNode is a secondary's real node as a description.
	RealNode *SecondaryRealNode `json:"realNode,omitempty"`
	// KubeVersion is the cluster's Kubernetes version ("": KUBE_VERSION).
	KubeVersion string `json:"kubeVersion,omitempty"`

	Dir     string `json:"dir"`
	DNSAddr string `json:"dnsAddr,omitempty"`
}

// Handle describes the running bed for Attach in another process.
func (b *Bed) Handle() Handle {
	h := Handle{WorkDir: b.WorkDir, KubeconfigPath: b.KubeconfigPath, ToolsDir: b.tools.toolsDir,
		RealNode: b.RealNode, Jaeger: b.Jaeger, NoMetrics: b.noMetrics, NoVolumes: b.noVolumes}
	for _, c := range b.Clusters() {
		h.Clusters = append(h.Clusters, ClusterHandle{Name: c.Name, Role: c.Role, KubeconfigPath: c.KubeconfigPath,
			Nodes: c.Nodes, DNSServiceIP: c.DNSServiceIP, ResizableStorage: c.ResizableStorage, RealNode: c.RealNode, KubeVersion: c.KubeVersion, Dir: c.dir, DNSAddr: c.dnsAddr})
	}
	return h
}

// Attach is the bed a Handle describes, as seen from another process: its clusters with clients
// of their own, their nodes and add-ons. The process that started the bed owns its processes:
// only it stops, freezes or starts a cluster again, and only it runs commands on the real nodes
// (an attached real node is a description: its name and addresses).
func Attach(h Handle, log io.Writer) (*Bed, error) {
	if log == nil {
		log = io.Discard
	}
	tools, err := findTools(h.ToolsDir)
	if err != nil {
		return nil, err
	}
	b := &Bed{WorkDir: h.WorkDir, KubeconfigPath: h.KubeconfigPath, RealNode: h.RealNode, Jaeger: h.Jaeger,
		tools: tools.withWorkDir(filepath.Join(h.WorkDir, "kwok")), log: log, noMetrics: h.NoMetrics, noVolumes: h.NoVolumes}
	for _, ch := range h.Clusters {
		c := &Cluster{Name: ch.Name, Role: ch.Role, Nodes: ch.Nodes, DNSServiceIP: ch.DNSServiceIP, ResizableStorage: ch.ResizableStorage, RealNode: ch.RealNode,
			KubeVersion: ch.KubeVersion, dir: ch.Dir, dnsAddr: ch.DNSAddr}
		// The cluster's own kubeconfig again, written by the bed: loading it fills the clients.
		if err := c.loadKubeconfigFile(ch.KubeconfigPath); err != nil {
			return nil, fmt.Errorf("attaching to cluster %s: %w", ch.Name, err)
		}
		switch c.Role {
		case RolePrimary:
			if b.Primary != nil {
				return nil, errors.New("attaching: the handle names two primaries")
			}
			b.Primary = c
		default:
			b.Secondaries = append(b.Secondaries, c)
			if c.RealNode != nil {
				b.SecondaryRealNodes = append(b.SecondaryRealNodes, c.RealNode)
			}
		}
	}
	if b.Primary == nil {
		return nil, errors.New("attaching: the handle names no primary")
	}
	return b, nil
}
