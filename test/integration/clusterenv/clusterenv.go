// Package clusterenv starts the clusters of an integration suite: real kube-apiservers and etcds
// (controller-runtime's envtest, with the test bed's own binaries from `make tools`), each with
// Flotilla's CRDs installed, and no controller-manager, scheduler or kubelet. A suite that needs a
// primary and a secondary starts two; what a controller-manager would do (a namespace's default
// ServiceAccount, a node's status) the suite does itself.
package clusterenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeschema "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

// Scheme knows the core kinds, Flotilla's, the MCS API's and CustomResourceDefinitions.
var Scheme = func() *runtimeschema.Scheme {
	s := runtimeschema.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(flotillav1.AddToScheme(s))
	utilruntime.Must(mcsv1beta1.Install(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}()

// Cluster is one running API server.
type Cluster struct {
	Name   string
	Config *rest.Config
	Client client.Client
	env    *envtest.Environment
}

// Start runs an API server and etcd from the tools directory ($FLOTILLA_TOOLS_DIR, exported by
// the Makefile) with Flotilla's CRDs and the MCS API's.
func Start(name string) (*Cluster, error) {
	assets := os.Getenv("FLOTILLA_TOOLS_DIR")
	if assets == "" {
		return nil, errors.New("FLOTILLA_TOOLS_DIR is not set: run the integration tier with `make integration` (it builds kube-apiserver and etcd with `make tools`)")
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases"), filepath.Join(RepoRoot(), "config", "crd", "mcs")},
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting cluster %s: %w", name, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	c, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("connecting to cluster %s: %w", name, err)
	}
	return &Cluster{Name: name, Config: cfg, Client: c, env: env}, nil
}

// Stop stops the API server and etcd (by their processes, which envtest started).
func (c *Cluster) Stop() error {
	if c == nil || c.env == nil {
		return nil
	}
	if err := c.env.Stop(); err != nil {
		return fmt.Errorf("stopping cluster %s: %w", c.Name, err)
	}
	return nil
}

// Kubeconfig is a kubeconfig with one context per cluster, named after it: what the registration
// Secret holds.
func Kubeconfig(clusters ...*Cluster) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	for _, c := range clusters {
		cfg.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
		cfg.AuthInfos[c.Name] = &clientcmdapi.AuthInfo{ClientCertificateData: c.Config.CertData, ClientKeyData: c.Config.KeyData,
			Token: c.Config.BearerToken}
		cfg.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name}
	}
	raw, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("writing the kubeconfig: %w", err)
	}
	return raw, nil
}

// Namespace creates a namespace with labels and its default ServiceAccount (no controller-manager
// makes one here).
func (c *Cluster) Namespace(ctx context.Context, name string, labels map[string]string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := c.Client.Create(ctx, ns); err != nil {
		return fmt.Errorf("creating namespace %s in %s: %w", name, c.Name, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "default"}}
	if err := c.Client.Create(ctx, sa); err != nil {
		return fmt.Errorf("creating the default ServiceAccount of %s in %s: %w", name, c.Name, err)
	}
	return nil
}

// ReadyNode creates a node that reports Ready with the given allocatable CPU and memory, as a
// kubelet and the node lifecycle controller would make it.
func (c *Cluster) ReadyNode(ctx context.Context, name, cpu, memory string) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64", corev1.LabelTopologyRegion: "region-" + c.Name}}}
	if err := c.Client.Create(ctx, node); err != nil {
		return fmt.Errorf("creating node %s in %s: %w", name, c.Name, err)
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods: resource.MustParse("110")}
	node.Status = corev1.NodeStatus{Capacity: res, Allocatable: res, Conditions: []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
	if err := c.Client.Status().Update(ctx, node); err != nil {
		return fmt.Errorf("making node %s Ready in %s: %w", name, c.Name, err)
	}
	// The API server's TaintNodesByCondition admission taints a new node not-ready; the node
	// lifecycle controller (not running here) lifts it once the node is Ready.
	node.Spec.Taints = nil
	if err := c.Client.Update(ctx, node); err != nil {
		return fmt.Errorf("lifting the not-ready taint of node %s in %s: %w", name, c.Name, err)
	}
	return nil
}

// LiftNotReadyTaint removes the node.kubernetes.io/not-ready taint the API server's
// TaintNodesByCondition admission puts on every new node, once the node is Ready, as the node
// lifecycle controller (not running here) does. A virtual node keeps the taints Flotilla gave it.
func (c *Cluster) LiftNotReadyTaint(ctx context.Context, name string) error {
	var node corev1.Node
	if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, &node); err != nil {
		return fmt.Errorf("getting node %s in %s: %w", name, c.Name, err)
	}
	if !placement.NodeReady(&node) {
		return fmt.Errorf("node %s in %s is not Ready", name, c.Name)
	}
	taints := node.Spec.Taints[:0]
	for _, t := range node.Spec.Taints {
		if t.Key != corev1.TaintNodeNotReady {
			taints = append(taints, t)
		}
	}
	if len(taints) == len(node.Spec.Taints) {
		return nil
	}
	node.Spec.Taints = taints
	if err := c.Client.Update(ctx, &node); err != nil {
		return fmt.Errorf("lifting the not-ready taint of node %s in %s: %w", name, c.Name, err)
	}
	return nil
}

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Run starts a controller-runtime manager for the whole suite; stop stops it and waits for it,
// returning what Start returned.
func Run(mgr manager.Manager) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background()) //nolint:forbidigo // the manager outlives every spec
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() error {
		cancel()
		return <-done
	}
}
