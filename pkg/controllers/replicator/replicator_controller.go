package replicator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/flotilla-dev/flotilla/internal/clocks"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/clusters/views"
	"github.com/flotilla-dev/flotilla/pkg/replication"
	"github.com/flotilla-dev/flotilla/pkg/ssa"
	"github.com/flotilla-dev/flotilla/pkg/tracing"
)

// PrimaryName names the primary in a Replicator's status.
const PrimaryName = "primary"

// Defaults of Reconciler.Resync and Reconciler.Retry.
const (
	DefaultResync = time.Minute
	DefaultRetry  = 10 * time.Second
)

// Registry is what the Replicator controller needs of the cluster registry.
type Registry interface {
	Snapshots() []clusters.Snapshot
	Secondary(name string) (clusters.Secondary, bool)
	PrimaryID() string
	Source(w clusters.Watch, h handler.EventHandler) source.Source
	UntilConfigured() (ctrl.Result, bool)
}

// Tenancy is what the Replicator controller reads of the namespaces' cluster sets.
type Tenancy interface {
	Denied(ctx context.Context, namespace string) (map[string]string, error)
}

// Reconciler applies each Replicator to the primary, then to its targets in parallel, and
// reports per cluster what is applied.
type Reconciler struct {
	// Client writes to the primary and reads Replicators and proxies from the cache.
	Client client.Client
	// WatchOverrides applies the Replicators of a namespace again when an Override there (or any
	// ClusterOverride) changes: where the primary serves those kinds.
	WatchOverrides bool
	// Live reads the primary without a cache (Deployments not yet Flotilla's, HPAs, the CA Secret).
	Live     client.Reader
	Registry Registry
	// Tenancy says which clusters the replication namespace may not use (its ClusterSetBindings;
	// nil: every one). A target denied is neither applied nor kept: what was applied there is
	// pruned.
	Tenancy  Tenancy
	Recorder events.EventRecorder
	// Tracer starts a span per pass and one per cluster applied to (nil: none).
	Tracer trace.Tracer
	// Timeout bounds the work in one cluster, so that a dead or slow one never delays the others.
	Timeout time.Duration
	// Resync is how often a synced Replicator is looked at again (DefaultResync when zero). Drift
	// is seen at once through the watches; a resync catches what a watch cannot show.
	Resync time.Duration
	// Clock dates what was applied and the TLS bundle's certificates (default: the real one).
	Clock clock.PassiveClock
	// Retry is how soon a Replicator not synced everywhere is tried again (DefaultRetry when zero).
	Retry time.Duration

	// applied lets a resync skip objects that are still as last applied: an idle cluster gets no
	// writes (drift shows as a new resourceVersion, and the drift watch brings the Replicator back).
	applied ssa.Ledger
}

func (r *Reconciler) resync() time.Duration { return cmp.Or(r.Resync, DefaultResync) }

// now is the reconciler's clock.
func (r *Reconciler) now() time.Time { return clocks.Now(r.Clock) }

func (r *Reconciler) retry() time.Duration { return cmp.Or(r.Retry, DefaultRetry) }

// blindReapply is how often an object Flotilla may not read (a Secret in a secondary, whose
// drift it cannot see) is applied again while nothing else changes.
const blindReapply = time.Hour

// placeResult is what happened in one cluster.
type placeResult struct {
	sync    flotillav1.ClusterSync
	applied []flotillav1.AppliedResource
	// problem is a namespace condition reason ("" when none).
	problem string
}

// Reconcile is one pass over one Replicator, with one status patch at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	rep := &flotillav1.Replicator{}
	if err := r.Client.Get(ctx, req.NamespacedName, rep); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Before the registration Secret is applied no cluster is known: every target would look
	// unknown, and a deleted Replicator's clusters unregistered, its finalizer removed with its
	// copies still there.
	if wait, waiting := r.Registry.UntilConfigured(); waiting {
		return wait, nil
	}
	ctx, span := tracing.OrNoop(r.Tracer).Start(ctx, "replicator reconcile", trace.WithAttributes(
		tracing.KeyNamespace.String(rep.Namespace), tracing.KeyName.String(rep.Name)))
	defer func() {
		span.SetAttributes(tracing.KeyOutcome.String(string(rep.Status.Synced)))
		tracing.End(span, retErr)
	}()
	if !rep.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, rep)
	}
	if !controllerutil.ContainsFinalizer(rep, flotillav1.FinalizerReplicator) {
		base := rep.DeepCopy()
		controllerutil.AddFinalizer(rep, flotillav1.FinalizerReplicator)
		if err := r.Client.Patch(ctx, rep, client.MergeFrom(base)); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
	}
	base := rep.DeepCopy()
	defer func() {
		if err := r.Client.Status().Patch(ctx, rep, client.MergeFrom(base)); err != nil && retErr == nil {
			retErr = client.IgnoreNotFound(fmt.Errorf("patching the status: %w", err))
		}
	}()
	return r.reconcileNormal(ctx, rep)
}

func (r *Reconciler) reconcileNormal(ctx context.Context, rep *flotillav1.Replicator) (ctrl.Result, error) {
	res := clusters.Resolve(rep.Spec.TargetCluster, r.Registry.Snapshots())
	if r.Tenancy != nil {
		denied, err := r.Tenancy.Denied(ctx, rep.Spec.ReplicationNamespace)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("reading the cluster sets of namespace %s: %w", rep.Spec.ReplicationNamespace, err)
		}
		res = res.Deny(denied)
	}
	in := replication.Inputs{Replicator: rep, PrimaryID: r.Registry.PrimaryID(), ElectClusters: res.Clusters}
	sources, err := views.Overrides(ctx, r.Client, rep.Spec.ReplicationNamespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	in.Overrides = sources
	// First, before anything is written anywhere (cert-manager Certificates included): a namespace
	// of the primary the Replicator did not create must opt in, and its verdict holds for every
	// cluster (their namespaces of that name mirror it).
	if err := r.gate(ctx, &in); err != nil {
		var notAllowed *NamespaceNotAllowedError
		if !errors.As(err, &notAllowed) {
			return ctrl.Result{}, err
		}
		r.refuse(rep, flotillav1.ReasonNamespaceNotAllowed, err.Error())
		return ctrl.Result{RequeueAfter: r.retry()}, nil
	}
	var issued []flotillav1.AppliedResource // cert-manager Certificates, in the primary
	if rep.Spec.IngressSecureEnabled {
		server, cli, certs, err := r.tlsMaterial(ctx, in)
		issued = certs
		if err != nil {
			// Reported, not retried in a loop: most causes are in the spec (no host to certify).
			meta.SetStatusCondition(&rep.Status.Conditions, metav1.Condition{Type: flotillav1.ConditionSynced, Status: metav1.ConditionFalse,
				Reason: flotillav1.ReasonTLSFailed, Message: err.Error(), ObservedGeneration: rep.Generation})
			rep.Status.Synced, rep.Status.ObservedGeneration = flotillav1.SyncedFalse, rep.Generation
			if errors.Is(err, errCertificatesPending) {
				meta.SetStatusCondition(&rep.Status.Conditions, metav1.Condition{Type: flotillav1.ConditionSynced, Status: metav1.ConditionFalse,
					Reason: flotillav1.ReasonCertificatesPending, Message: err.Error(), ObservedGeneration: rep.Generation})
				return ctrl.Result{RequeueAfter: time.Second}, nil
			}
			r.event(rep, corev1.EventTypeWarning, flotillav1.ReasonTLSFailed, "Issue", "%v", err)
			return ctrl.Result{RequeueAfter: r.retry()}, nil
		}
		in.ServerTLS, in.ClientTLS = server, cli
	}
	results, rollout := r.applyInWaves(ctx, in, res.Clusters)
	if !results[0].sync.Held {
		results[0].applied = append(results[0].applied, issued...)
	}
	results = append(results, r.prune(ctx, rep, results, res.Clusters)...)
	setStatus(rep, results, res)
	r.setProgressing(rep, rollout)
	for _, pr := range results {
		if !pr.sync.Synced && !pr.sync.Held {
			r.event(rep, corev1.EventTypeWarning, flotillav1.ReasonApplyFailed, "Apply", "Cluster %s: %s", pr.sync.Name, pr.sync.Message)
		}
	}
	if rep.Status.Synced != flotillav1.SyncedTrue || meta.IsStatusConditionFalse(rep.Status.Conditions, flotillav1.ConditionReady) ||
		meta.IsStatusConditionFalse(rep.Status.Conditions, flotillav1.ConditionHealthy) {
		return ctrl.Result{RequeueAfter: r.retry()}, nil
	}
	return ctrl.Result{RequeueAfter: r.resync()}, nil
}

// plumberFieldManager is the field manager of what plumber applied.
const plumberFieldManager = "plumber"

func (r *Reconciler) event(rep *flotillav1.Replicator, kind, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(rep, nil, kind, reason, action, format, args...)
	}
}
