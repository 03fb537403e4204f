// Command cert-manager-cainjector is cert-manager's CA injector for the test bed, built from the Go
// module proxy for the same reason as the controller beside it (cert-manager's cmd/cainjector is a
// module the proxy does not serve): it registers the injectors of
// github.com/cert-manager/cert-manager/pkg/controller/cainjector into a controller-runtime manager
// configured as cert-manager's cainjector app configures its own (Secrets read uncached, their
// metadata cached). Only the MutatingWebhookConfiguration injector is enabled: that is what the
// Flotilla chart's webhook.certManager option needs. No leader election or metrics: the test bed
// runs one instance.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmscheme "github.com/cert-manager/cert-manager/pkg/api"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
)

func main() {
	// Its own flag set: controller-runtime registers --kubeconfig on the global one.
	fs := flag.NewFlagSet("cert-manager-cainjector", flag.ExitOnError)
	var kubeconfig, namespace string
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (required)")
	fs.StringVar(&namespace, "namespace", "", "inject only from Certificates and Secrets of this namespace (all when empty)")
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[1:])
	ctrl.SetLogger(klog.NewKlogr())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM) //nolint:forbidigo // main creates the root context
	err := run(ctx, kubeconfig, namespace)
	stop()
	if err != nil {
		klog.ErrorS(err, "cert-manager cainjector failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, kubeconfig, namespace string) error {
	if kubeconfig == "" {
		return errors.New("--kubeconfig is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	utilruntime.Must(apiregistrationv1.AddToScheme(scheme))
	utilruntime.Must(admissionregistrationv1.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		// As cert-manager's app: the injectors cache only Secrets' metadata and read their data live.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		Namespace:                    namespace,
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor:        map[string]bool{cainjector.MutatingWebhookConfigurationName: true},
	}); err != nil {
		return fmt.Errorf("registering the injectors: %w", err)
	}
	klog.InfoS("cert-manager cainjector started", "namespace", namespace)
	return mgr.Start(ctx)
}
