package clusterdetector

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// Registry is what the reconciler reads of the cluster registry.
type Registry interface {
	Configured() bool
	ConfigError() error
	Snapshot(name string) (clusters.Snapshot, bool)
	Snapshots() []clusters.Snapshot
	ClusterSource(h handler.EventHandler) source.Source
	PrimaryID() string
}

var _ Registry = (*clusters.Registry)(nil)

// Reconciler keeps one ClusterDetector per registered cluster.
type Reconciler struct {
	Client   client.Client
	Registry Registry
	// PrimaryName names the primary's ClusterDetector (the primary's context, when registered,
	// shows in its spec).
	PrimaryName string
	// Refresh is how often a ClusterDetector's probe time is refreshed when nothing else changes. Default 30s.
	Refresh time.Duration
	// Recorder emits an Event when a cluster's status changes.
	Recorder events.EventRecorder
	// PrimaryVersion is the primary's API server version (read once at start), shown in its
	// ClusterDetector when no registered context names the primary.
	PrimaryVersion string
}

// Reconcile creates, updates or deletes one ClusterDetector.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	if !r.Registry.Configured() {
		// Before the registration Secret is read, a missing cluster means nothing.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	in, registered := r.input(req.Name)
	cd := &flotillav1.ClusterDetector{}
	err := r.Client.Get(ctx, req.NamespacedName, cd)
	switch {
	case apierrors.IsNotFound(err) && !registered:
		return ctrl.Result{}, nil
	case err != nil && !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("reading ClusterDetector %s: %w", req.Name, err)
	case !registered:
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, cd))
	case apierrors.IsNotFound(err) && unprobed(in):
		// Not made before the cluster's first probe: a context that names the primary itself is
		// shown on the primary's ClusterDetector, and would have had one of its own for a moment.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	case apierrors.IsNotFound(err):
		cd = &flotillav1.ClusterDetector{ObjectMeta: metav1.ObjectMeta{Name: req.Name, Namespace: req.Namespace}}
		setSpec(cd, in)
		if err := r.Client.Create(ctx, cd); err != nil {
			return ctrl.Result{}, fmt.Errorf("creating ClusterDetector %s: %w", req.Name, err)
		}
	}

	base := cd.DeepCopy()
	defer func() {
		setStatus(cd, in)
		r.recordTransition(base, cd)
		if equality.Semantic.DeepEqual(base.Status, cd.Status) {
			return
		}
		if err := r.Client.Status().Patch(ctx, cd, client.MergeFrom(base)); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, fmt.Errorf("patching ClusterDetector %s status: %w", req.Name, err)})
		}
	}()
	setSpec(cd, in)
	if !equality.Semantic.DeepEqual(base.Spec, cd.Spec) || !equality.Semantic.DeepEqual(base.Labels, cd.Labels) {
		if err := r.Client.Patch(ctx, cd, client.MergeFrom(base)); err != nil {
			return ctrl.Result{}, fmt.Errorf("patching ClusterDetector %s: %w", req.Name, err)
		}
		base.Spec, base.Labels = cd.Spec, cd.Labels
	}
	return ctrl.Result{RequeueAfter: r.refresh()}, nil
}

// unprobed says whether a secondary's context has not been probed yet (one that cannot be, an
// invalid or unregistered context, has its reason to show at once).
func unprobed(in StatusInput) bool {
	s := in.Snapshot
	return !in.Primary && s.LastProbe.IsZero() && s.Reason != flotillav1.ReasonInvalidContext && s.Reason != flotillav1.ReasonNotRegistered
}

// recordTransition emits an Event when the cluster's status changes (not on creation).
func (r *Reconciler) recordTransition(before, after *flotillav1.ClusterDetector) {
	if r.Recorder == nil || before.Status.ClusterStatus == "" || before.Status.ClusterStatus == after.Status.ClusterStatus {
		return
	}
	if after.Status.ClusterStatus == flotillav1.ClusterRunning {
		r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, flotillav1.ReasonProbeSucceeded, "Probe",
			"Cluster %s answers its health probes again", after.Name)
		return
	}
	r.Recorder.Eventf(after, nil, corev1.EventTypeWarning, after.Status.Reason, "Probe",
		"Cluster %s is %s: %s", after.Name, after.Status.ClusterStatus, after.Status.Message)
}

func (r *Reconciler) refresh() time.Duration {
	if r.Refresh == 0 {
		return 30 * time.Second
	}
	return r.Refresh
}

// input finds what the named ClusterDetector shows. The primary's always exists; a context that
// turns out to be the primary's is shown there, not under its own name.
func (r *Reconciler) input(name string) (StatusInput, bool) {
	if name == r.PrimaryName {
		snap := clusters.Snapshot{Name: name, Role: clusters.RolePrimary, ID: r.Registry.PrimaryID(),
			Status: flotillav1.ClusterRunning}
		for _, s := range r.Registry.Snapshots() {
			if s.Role == clusters.RolePrimary {
				snap = s
				break
			}
		}
		return StatusInput{Snapshot: snap, Primary: true, ConfigError: r.Registry.ConfigError(), PrimaryVersion: r.PrimaryVersion}, true
	}
	snap, ok := r.Registry.Snapshot(name)
	if !ok || snap.Role == clusters.RolePrimary {
		return StatusInput{}, false
	}
	return StatusInput{Snapshot: snap}, true
}
