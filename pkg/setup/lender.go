package setup

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/controllers/allowance"
)

// LenderOptions are flotilla-manager lender's: the lender runs in a secondary and holds each
// primary to its PrimaryAllowance there.
type LenderOptions struct {
	MetricsBindAddress, HealthProbeBindAddress string
	LeaderElection                             bool
	// LeaderElectionNamespace holds the lender's Lease (flotilla-system).
	LeaderElectionNamespace string
	// LeaseName is the lender's Lease; "": flotilla-lender.flotilla.dev (--name-prefix).
	LeaseName string
}

// NewLender builds the lender's manager: its cache holds only PrimaryAllowances, the namespaces
// a primary manages (label-selected) and the lender's own quotas (label-selected).
func NewLender(ctx context.Context, cfg *rest.Config, opts LenderOptions, log logr.Logger) (ctrl.Manager, error) {
	has := func(label string) labels.Selector {
		r, err := labels.NewRequirement(label, selection.Exists, nil)
		if err != nil {
			panic(err) // a constant label key
		}
		return labels.NewSelector().Add(*r)
	}
	lease, renew, retry := 15*time.Second, 10*time.Second, 2*time.Second
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: NewScheme(),
		Logger: log,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Namespace{}:     {Label: has(flotillav1.LabelManagedBy)},
			&corev1.ResourceQuota{}: {Label: has(flotillav1.LabelAllowance)},
		}},
		Metrics:                       metricsserver.Options{BindAddress: opts.MetricsBindAddress},
		HealthProbeBindAddress:        opts.HealthProbeBindAddress,
		LeaderElection:                opts.LeaderElection,
		LeaderElectionID:              cmp.Or(opts.LeaseName, flotillav1.NamesFrom("").LenderLease),
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &lease,
		RenewDeadline:                 &renew,
		RetryPeriod:                   &retry,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the lender's manager: %w", err)
	}
	if err := addHealthChecks(mgr); err != nil {
		return nil, err
	}
	r := &allowance.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("flotilla-lender")}
	if err := r.SetupWithManager(ctx, mgr, controller.Options{}); err != nil {
		return nil, fmt.Errorf("setting up the lender: %w", err)
	}
	return mgr, nil
}
