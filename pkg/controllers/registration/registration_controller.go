package registration

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// Registry is what the reconciler feeds: the cluster registry applies a kubeconfig (nil: the
// Secret or its key is missing).
type Registry interface {
	Apply(raw []byte) error
	SetRemoved(removed map[string]bool)
	SetPinned(pinned map[string]string)
	SetStorageClasses(classes map[string]string)
	SetModes(modes map[string]string)
}

var _ Registry = (*clusters.Registry)(nil)

// Reconciler feeds the registration Secret to the cluster registry whenever it changes.
type Reconciler struct {
	Client   client.Reader
	Registry Registry
	Recorder events.EventRecorder
}

// Reconcile applies the current registration Secret. An unparsable one is reported as a Warning
// Event on the Secret (and on the primary's ClusterDetector) and otherwise ignored: the last
// good configuration stays in force.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var secret corev1.Secret
	err := r.Client.Get(ctx, req.NamespacedName, &secret)
	switch {
	case apierrors.IsNotFound(err):
		_ = r.Registry.Apply(nil)
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading the registration Secret: %w", err)
	}
	raw, ok := secret.Data[flotillav1.KubeconfigSecretKey]
	if !ok {
		raw = nil
	}
	r.Registry.SetRemoved(clusters.RemovedClusters(&secret))
	r.Registry.SetPinned(clusters.PinnedIDs(&secret))
	r.Registry.SetStorageClasses(clusters.StorageClasses(&secret))
	r.Registry.SetModes(clusters.Modes(&secret))
	if err := r.Registry.Apply(raw); err != nil && r.Recorder != nil {
		r.Recorder.Eventf(&secret, nil, corev1.EventTypeWarning, flotillav1.ReasonKubeconfigUnparsable, "Register",
			"Registration kubeconfig not applied, the last good one stays in force: %s", err.Error())
	}
	return ctrl.Result{}, nil
}
