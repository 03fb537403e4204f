// Command cert-manager-controller is cert-manager's controller for the test bed, built from the
// Go module proxy: cert-manager's own controllers (github.com/cert-manager/cert-manager/pkg/controller
// and the packages that register into it), run the way cert-manager's controller binary runs them.
//
// cert-manager's binary itself cannot be built from the proxy: its main and app packages
// (cmd/controller in the repository) form the module github.com/cert-manager/cert-manager/controller-binary,
// which names no directory of the repository, so the proxy has no version of it, and the
// cert-manager module's zip leaves cmd/ out. This runner therefore builds the controllers' shared
// context with controller.NewContextFactory, constructs the controllers named by --controllers
// from controller.Known() and starts the informers, as that app does; it has no leader election,
// metrics or health endpoints (the test bed runs one instance and checks it by issuing).
//
// Only the controllers for SelfSigned and CA Issuers, ClusterIssuers and Certificates are linked
// in (no ACME, Vault or Venafi), which keeps the build small.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	// The controllers, registered into controller.Known() by their init, and the Issuer types
	// (SelfSigned, CA) the issuers controllers set up.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

type options struct {
	kubeconfig               string
	namespace                string
	clusterResourceNamespace string
	controllers              string
	workers                  int
	qps                      float64
	burst                    int
	minBackoff               time.Duration
}

func main() {
	known := registered()
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (required)")
	flag.StringVar(&o.namespace, "namespace", "", "watch only this namespace (all when empty)")
	flag.StringVar(&o.clusterResourceNamespace, "cluster-resource-namespace", "cert-manager",
		"namespace of the Secrets ClusterIssuers refer to")
	flag.StringVar(&o.controllers, "controllers", strings.Join(known, ","), "comma-separated controllers to run, of: "+strings.Join(known, ", "))
	flag.IntVar(&o.workers, "concurrent-workers", 5, "workers per controller")
	flag.Float64Var(&o.qps, "kube-api-qps", 50, "queries per second to the API server")
	flag.IntVar(&o.burst, "kube-api-burst", 100, "burst of queries to the API server")
	flag.DurationVar(&o.minBackoff, "certificate-request-minimum-backoff-duration", time.Hour,
		"first wait after a failed issuance (doubled each time)")
	klog.InitFlags(flag.CommandLine) // -v: cert-manager logs what it does at level 2
	flag.Parse()

	logf.InitLogs()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM) //nolint:forbidigo // main creates the root context
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	err := run(ctx, o)
	stop()
	if err != nil {
		logf.Log.Error(err, "cert-manager controller failed")
		logf.FlushLogs()
		os.Exit(1)
	}
	logf.FlushLogs()
}

// registered lists the controllers linked into this binary, sorted.
func registered() []string {
	var names []string
	for name := range controller.Known() {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func run(ctx context.Context, o options) error {
	if o.kubeconfig == "" {
		return errors.New("--kubeconfig is required")
	}
	log := logf.FromContext(ctx)
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         o.kubeconfig,
		KubernetesAPIQPS:   float32(o.qps),
		KubernetesAPIBurst: o.burst,
		Namespace:          o.namespace,
		IssuerOptions:      controller.IssuerOptions{ClusterResourceNamespace: o.clusterResourceNamespace},
		CertificateOptions: controller.CertificateOptions{CertificateRequestMinimumBackoffDuration: o.minBackoff},
	})
	if err != nil {
		return fmt.Errorf("building the controllers' context: %w", err)
	}
	base, err := factory.Build()
	if err != nil {
		return fmt.Errorf("building the controllers' context: %w", err)
	}

	g, gctx := errgroup.WithContext(ctx)
	for name := range strings.SplitSeq(o.controllers, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		construct, ok := controller.Known()[name]
		if !ok {
			return fmt.Errorf("unknown controller %q (this build has %s)", name, strings.Join(registered(), ", "))
		}
		c, err := construct(factory)
		if err != nil {
			return fmt.Errorf("constructing controller %s: %w", name, err)
		}
		g.Go(func() error {
			log.V(logf.InfoLevel).Info("starting controller", "controller", name)
			if err := c.Run(o.workers, gctx); err != nil {
				return fmt.Errorf("controller %s: %w", name, err)
			}
			return nil
		})
	}
	// The informers the controllers asked for; started after every controller registered its own.
	base.SharedInformerFactory.Start(gctx.Done())
	base.KubeSharedInformerFactory.Start(gctx.Done())
	log.Info("cert-manager controllers started", "controllers", o.controllers, "namespace", o.namespace)

	err = g.Wait()
	base.KubeSharedInformerFactory.Shutdown()
	base.SharedInformerFactory.Shutdown()
	return err
}
