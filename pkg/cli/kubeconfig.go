package cli

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// cliScheme is the registry's (clusters.NewScheme), and the CRDs that `doctor` and `uninstall` read.
var cliScheme = func() *runtime.Scheme {
	s := clusters.NewScheme()
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}()

// userConfig is the user's kubeconfig, loaded the way kubectl loads it, with files embedded.
func (g *GlobalOptions) userConfig() (*clientcmdapi.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if g.Kubeconfig != "" {
		rules.ExplicitPath = g.Kubeconfig
	}
	cfg, err := rules.Load()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return nil, fmt.Errorf("embedding the kubeconfig's files: %w", err)
	}
	return cfg, nil
}

// restConfigFor builds a REST config for a context of the user's kubeconfig.
func restConfigFor(cfg *clientcmdapi.Config, context string) (*rest.Config, error) {
	if context == "" {
		context = cfg.CurrentContext
	}
	if _, ok := cfg.Contexts[context]; !ok {
		return nil, fmt.Errorf("context %q is not in the kubeconfig", context)
	}
	rc, err := clientcmd.NewNonInteractiveClientConfig(*cfg, context, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("context %q: %w", context, err)
	}
	rc.QPS, rc.Burst = 50, 100
	return rc, nil
}

// clientFor builds a controller-runtime client for a context of the user's kubeconfig.
func clientFor(cfg *clientcmdapi.Config, context string) (client.Client, *rest.Config, error) {
	rc, err := restConfigFor(cfg, context)
	if err != nil {
		return nil, nil, err
	}
	c, err := client.New(rc, client.Options{Scheme: cliScheme})
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to context %q: %w", context, err)
	}
	return c, rc, nil
}

// registeredClient builds a client for a context of the registration kubeconfig, only through
// clusters.RESTConfigFor: a refused context (an exec plugin, a file path, impersonation, a proxy)
// never runs or reads anything on the operator's machine.
func registeredClient(reg *clientcmdapi.Config, contextName string) (client.Client, error) {
	rc, err := clusters.RESTConfigFor(reg, contextName)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 50, 100
	c, err := client.New(rc, client.Options{Scheme: cliScheme})
	if err != nil {
		return nil, fmt.Errorf("connecting to registered context %q: %w", contextName, err)
	}
	return c, nil
}

// registrableEntries are the cluster and user entries join and add write into the registration:
// copies without what the manager has no use for (where the loader found them, extensions), and
// refused (clusters.ValidateContext) when they hold anything else the registration refuses, so
// what is registered is what the manager will use.
func registrableEntries(contextName string, cluster *clientcmdapi.Cluster, user *clientcmdapi.AuthInfo) (*clientcmdapi.Cluster, *clientcmdapi.AuthInfo, error) {
	cluster, user = cluster.DeepCopy(), user.DeepCopy()
	cluster.LocationOfOrigin, cluster.Extensions = "", nil
	user.LocationOfOrigin, user.Extensions = "", nil
	probe := clientcmdapi.NewConfig()
	probe.Clusters["c"], probe.AuthInfos["u"] = cluster, user
	probe.Contexts[contextName] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	if err := clusters.ValidateContext(probe, contextName); err != nil {
		return nil, nil, fmt.Errorf("not registering it: %w", err)
	}
	return cluster, user, nil
}

// updateRegistration creates the system namespace when missing, then applies mutate to the
// registration kubeconfig (the one read-modify-write the manager uses too).
func updateRegistration(ctx context.Context, primary client.Client, mutate func(*clusters.Registration) error) error {
	if err := ensureNamespace(ctx, primary, flotillav1.SystemNamespace, nil); err != nil {
		return err
	}
	return clusters.UpdateRegistration(ctx, primary, mutate)
}

func ensureNamespace(ctx context.Context, c client.Client, name string, labels map[string]string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// uniqueEntryName returns name when it is free in the map (or holds an equal entry), else name-suffix.
func uniqueEntryName[T any](entries map[string]T, name, suffix string, equal func(T) bool) string {
	if have, ok := entries[name]; !ok || equal(have) {
		return name
	}
	return name + "-" + suffix
}

// putContext writes a context into the registration kubeconfig: cluster and user entries keep the
// user's names unless another registered context already uses them differently.
func putContext(reg *clientcmdapi.Config, name string, cluster *clientcmdapi.Cluster, clusterName string,
	user *clientcmdapi.AuthInfo, userName string) {
	removeContext(reg, name)
	clusterKey := uniqueEntryName(reg.Clusters, clusterName, name, func(c *clientcmdapi.Cluster) bool {
		return c.Server == cluster.Server && string(c.CertificateAuthorityData) == string(cluster.CertificateAuthorityData)
	})
	userKey := uniqueEntryName(reg.AuthInfos, userName, name, func(*clientcmdapi.AuthInfo) bool { return false })
	reg.Clusters[clusterKey] = cluster
	reg.AuthInfos[userKey] = user
	reg.Contexts[name] = &clientcmdapi.Context{Cluster: clusterKey, AuthInfo: userKey}
}

// removeContext deletes a context and the cluster and user entries no other context uses.
func removeContext(reg *clientcmdapi.Config, name string) bool {
	kctx, ok := reg.Contexts[name]
	if !ok {
		return false
	}
	delete(reg.Contexts, name)
	clusterUsed, userUsed := false, false
	for _, other := range reg.Contexts {
		clusterUsed = clusterUsed || other.Cluster == kctx.Cluster
		userUsed = userUsed || other.AuthInfo == kctx.AuthInfo
	}
	if !clusterUsed {
		delete(reg.Clusters, kctx.Cluster)
	}
	if !userUsed {
		delete(reg.AuthInfos, kctx.AuthInfo)
	}
	return true
}

// errExecCredential explains why a context that runs a credential plugin cannot be added.
var errExecCredential = errors.New("authenticates with an exec plugin or auth provider, which the manager cannot run " +
	"in the primary; register it with `flotillactl cluster join --secondary-context <context>`, which gives Flotilla a " +
	"ServiceAccount token of its own there (the way for GKE, EKS and AKS)")
