package replicator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters/views"
	"github.com/flotilla-dev/flotilla/pkg/overrides"
	"github.com/flotilla-dev/flotilla/pkg/replication"
	"github.com/flotilla-dev/flotilla/pkg/tracing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/ssa"
)

func (r *Reconciler) applyPrimary(ctx context.Context, in replication.Inputs) placeResult {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	start := r.now()
	pr := r.applyPlace(ctx, in, PrimaryName, true, r.Client, r.Live)
	observeApply(pr, r.now().Sub(start))
	return pr
}

// applyTargets applies to every secondary at once, each bounded by Timeout.
func (r *Reconciler) applyTargets(ctx context.Context, in replication.Inputs, names []string) []placeResult {
	out := make([]placeResult, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sec, ok := r.Registry.Secondary(name)
			if !ok {
				out[i] = failed(name, "the cluster is not usable (not answering, or not a secondary)")
				applyErrors.WithLabelValues(name).Inc()
				return
			}
			cctx, cancel := context.WithTimeout(ctx, r.Timeout)
			defer cancel()
			start := r.now()
			out[i] = r.applyPlace(cctx, in, name, false, sec.Client, sec.Client)
			observeApply(out[i], r.now().Sub(start))
		}()
	}
	wg.Wait()
	return out
}

func failed(cluster, msg string) placeResult {
	return placeResult{sync: flotillav1.ClusterSync{Name: cluster, Role: roleOf(cluster == PrimaryName), Message: msg}}
}

func roleOf(primary bool) string {
	if primary {
		return flotillav1.RolePrimary
	}
	return flotillav1.RoleSecondary
}

// desiredIn is what a Replicator applies in one cluster: what is known of it (its live selector
// and HPA, what its Overrides see of it) and the objects. An Override rule that cannot apply is a
// Warning Event too.
func (r *Reconciler) desiredIn(ctx context.Context, in replication.Inputs, cluster string, primary bool, live client.Reader) (replication.Place, []*unstructured.Unstructured, error) {
	place := replication.Place{Cluster: cluster, Primary: primary}
	if err := readLive(ctx, live, in.Replicator, &place); err != nil {
		return place, nil, err
	}
	if !primary && len(in.Overrides) > 0 {
		c, err := views.OverrideCluster(ctx, r.Client, cluster)
		if err != nil {
			return place, nil, err
		}
		place.Overrides = c
	}
	objs, err := replication.Desired(in, place)
	var failed *overrides.Failure
	if errors.As(err, &failed) {
		r.event(in.Replicator, corev1.EventTypeWarning, flotillav1.ReasonOverrideFailed, "Apply", "In %s, %v: nothing there changed", cluster, err)
		if rerr := views.RecordOverrideFailure(ctx, r.Client, failed, "Replicator "+in.Replicator.Name, cluster); rerr != nil {
			ctrl.LoggerFrom(ctx).Error(rerr, "Cannot say on the override that a rule cannot apply")
		}
	}
	return place, objs, err
}

// applyPlace ensures the namespace and applies every desired object in one cluster.
func (r *Reconciler) applyPlace(ctx context.Context, in replication.Inputs, cluster string, primary bool, w client.Client, live client.Reader) (pr placeResult) {
	rep := in.Replicator
	ctx, span := tracing.OrNoop(r.Tracer).Start(ctx, "replicator apply", trace.WithAttributes(tracing.KeyCluster.String(cluster),
		tracing.KeyNamespace.String(rep.Namespace), tracing.KeyName.String(rep.Name)))
	defer func() { endApplySpan(span, pr) }()
	pr = placeResult{sync: flotillav1.ClusterSync{Name: cluster, Role: roleOf(primary), ObservedGeneration: rep.Generation}}
	if reason, err := r.ensureNamespace(ctx, in, cluster, primary, w, live); err != nil {
		pr.sync.Message, pr.problem = err.Error(), reason
		return pr
	}
	place, objs, err := r.desiredIn(ctx, in, cluster, primary, live)
	if err != nil {
		pr.sync.Message = err.Error()
		return pr
	}
	var failures []string
	fail := func(ar flotillav1.AppliedResource, o *unstructured.Unstructured, err error) {
		ar.ApplyStatus, ar.Message = flotillav1.ApplyStatusFailed, err.Error()
		failures = append(failures, fmt.Sprintf("%s %s: %v", o.GetKind(), o.GetName(), err))
		pr.applied = append(pr.applied, ar)
		if reason := kindProblemOf(err); reason != "" {
			pr.problem = reason
		}
	}
	if !primary && rep.Spec.ReplicateCRDs {
		defs, err := r.replicateDefinitions(ctx, in, cluster, w, objs)
		pr.applied = append(pr.applied, defs...)
		if err != nil {
			failures = append(failures, err.Error())
			if reason := kindProblemOf(err); reason != "" {
				pr.problem = reason
			}
		}
	}
	at := applyTarget{cluster: cluster, primary: primary, w: w, live: live, place: place}
	for _, o := range objs {
		ar, err := r.applyObject(ctx, in, at, o, objs)
		if err != nil {
			fail(ar, o, err)
			continue
		}
		pr.applied = append(pr.applied, ar)
	}
	if len(failures) > 0 {
		pr.sync.Message = failures[0]
		if len(failures) > 1 {
			pr.sync.Message += fmt.Sprintf(" (and %d more)", len(failures)-1)
		}
		return pr
	}
	pr.sync.Synced = true
	now := metav1.Now()
	pr.sync.LastSyncTime = &now
	r.readReplicas(ctx, in, cluster, primary, live, &pr.sync)
	pr.sync.Health = r.observeHealth(ctx, in, place, live, objs, &pr.sync)
	pr.sync.Healthy = allHealthy(pr.sync.Health)
	return pr
}

// applyTarget is the cluster applyPlace writes to, and what it knows of it.
type applyTarget struct {
	cluster string
	primary bool
	w       client.Client
	live    client.Reader
	place   replication.Place
}

// applyObject applies one desired object in one cluster, unless it is as last applied: its kind
// served and allowed there, its ServiceAccount allowed, the live object this Replicator's (or
// nobody's). An error is why it is not applied (an Event too, for someone else's object).
func (r *Reconciler) applyObject(ctx context.Context, in replication.Inputs, at applyTarget, o *unstructured.Unstructured,
	objs []*unstructured.Unstructured) (flotillav1.AppliedResource, error) {
	rep := in.Replicator
	ar := flotillav1.AppliedResource{Cluster: at.cluster, APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(), ApplyStatus: flotillav1.ApplyStatusOK}
	kind, err := kindIn(at.w.RESTMapper(), o, at.cluster, at.primary)
	if err != nil {
		return ar, err
	}
	if err := r.serviceAccountAllowed(ctx, at.live, in, at.place, o, objs); err != nil {
		return ar, err
	}
	foreign, liveVersion, err := notOurs(ctx, at.live, rep, in.PrimaryID, o, at.place, kind)
	if err == nil && foreign != "" {
		r.event(rep, corev1.EventTypeWarning, flotillav1.ReasonObjectNotOurs, "Apply", "In %s, %s", at.cluster, foreign)
		return ar, errors.New(foreign)
	}
	if err != nil {
		return ar, notAllowed(err, kind, at.cluster, at.primary)
	}
	key := appliedKey(rep, at.cluster, o.GroupVersionKind().GroupKind(), o.GetName())
	hash, err := ssa.Hash(o.Object)
	readable := at.primary || !kind.WriteOnly
	if err == nil && (r.applied.Unchanged(key, hash, liveVersion, readable, r.now(), blindReapply) ||
		r.alreadyAsDesired(ctx, at, o, key, hash, liveVersion, readable)) {
		return ar, nil
	}
	holder, err := ssa.Apply(ctx, at.w, o, flotillav1.FieldManagerReplicator, flotillav1.FieldManagerReflection)
	if err == nil && holder == "" && hash != "" {
		r.applied.Record(key, hash, ssa.Version(o), r.now())
	} else {
		r.applied.Forget(key)
	}
	switch {
	case err != nil:
		return ar, notAllowed(err, kind, at.cluster, at.primary)
	case holder != "":
		ar.ApplyStatus, ar.Message = flotillav1.ApplyStatusDependencyCopy,
			"copied first by Flotilla's dependency reflection for the elected pods that use it, which keeps it in sync: left to it"
	}
	return ar, nil
}

// endApplySpan ends a cluster's apply span with its outcome: synced, or what failed (the
// condition's reason only: a failure's message may quote what the cluster refused).
func endApplySpan(span trace.Span, pr placeResult) {
	if pr.sync.Synced {
		span.SetAttributes(tracing.KeyOutcome.String("Synced"))
	} else {
		span.SetAttributes(tracing.KeyOutcome.String("NotSynced"), tracing.KeyReason.String(cmp.Or(pr.problem, flotillav1.ReasonApplyFailed)))
		span.SetStatus(codes.Error, "not synced")
	}
	span.End()
}

// readableIn says whether Flotilla reads objects of a kind in a cluster: everything in the primary,
// and in a secondary all but the kinds it only writes (Secrets).
func readableIn(gk schema.GroupKind, primary bool) bool {
	k, _ := flotillav1.SpecialKind(gk)
	return primary || !k.WriteOnly
}

// readLive reads what decides parts of the desired objects: the live Deployment's selector and
// whether an HPA scales it.
// notOurs says why an object the Replicator would apply must be left alone: it exists, and is
// neither this Replicator's (its label), nor a dependency copy of this primary's, nor plumber's (plumber's field manager: a plumber
// Deployment is taken over, as users migrating expect). A user's object of the same name is never
// overwritten, so never deleted with the Replicator either. Secrets are never read in a
// secondary; there the admission policy installed by join refuses overwriting what is not
// Flotilla's.
func notOurs(ctx context.Context, live client.Reader, rep *flotillav1.Replicator, primaryID string, o *unstructured.Unstructured, place replication.Place,
	kind flotillav1.ReplicatedKind) (foreign, liveVersion string, err error) {
	primary := place.Primary
	if !primary && kind.WriteOnly {
		return "", "", nil
	}
	var have metav1.Object
	if o.GetKind() == "Deployment" && o.GetName() == rep.Spec.DeploymentName {
		// readLive has just read it.
		if place.LiveDeployment == nil {
			return "", "", nil
		}
		have = place.LiveDeployment
	} else {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(o.GroupVersionKind())
		err = live.Get(ctx, client.ObjectKeyFromObject(o), u)
		have = u
	}
	switch {
	case apierrors.IsNotFound(err):
		return "", "", nil
	case err != nil:
		return "", "", fmt.Errorf("reading %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	case have.GetLabels()[flotillav1.LabelReplicator] == flotillav1.ReplicatorLabelValue(rep.Name):
		return "", ssa.Version(have), nil
	case !primary && have.GetAnnotations()[flotillav1.AnnotationOwner] == flotillav1.OwnerReflect && have.GetLabels()[flotillav1.LabelPrimary] == primaryID:
		// A dependency copy of this primary's (placement Elect: the delegates' ConfigMap and
		// Service): one owner per copy, the apply yields to reflection's field manager.
		return "", ssa.Version(have), nil
	}
	if ssa.Holds(have, plumberFieldManager) {
		return "", ssa.Version(have), nil
	}
	return fmt.Sprintf("%s %s/%s exists and is not this Replicator's: left alone (rename it, or delete it to let the Replicator create its own)",
		o.GetKind(), o.GetNamespace(), o.GetName()), "", nil
}

func readLive(ctx context.Context, live client.Reader, rep *flotillav1.Replicator, place *replication.Place) error {
	if rep.Spec.DeploymentName == "" {
		return nil
	}
	ns := rep.Spec.ReplicationNamespace
	var d appsv1.Deployment
	err := live.Get(ctx, client.ObjectKey{Namespace: ns, Name: rep.Spec.DeploymentName}, &d)
	switch {
	case err == nil:
		place.LiveSelector, place.LiveDeployment = d.Spec.Selector, &d
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading Deployment %s/%s: %w", ns, rep.Spec.DeploymentName, err)
	}
	var hpas autoscalingv2.HorizontalPodAutoscalerList
	if err := live.List(ctx, &hpas, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing HorizontalPodAutoscalers in %s: %w", ns, err)
	}
	for _, h := range hpas.Items {
		ref := h.Spec.ScaleTargetRef
		if ref.Kind == "Deployment" && ref.Name == rep.Spec.DeploymentName {
			place.HPA = true
		}
	}
	return nil
}

// readReplicas fills the Deployment's replica counts in one cluster: its own Deployment's, or
// with placement Elect, the proxies elected to that cluster.
func (r *Reconciler) readReplicas(ctx context.Context, in replication.Inputs, cluster string, primary bool, live client.Reader, cs *flotillav1.ClusterSync) {
	rep := in.Replicator
	if rep.Spec.DeploymentSpec == nil || rep.Spec.DeploymentName == "" {
		return
	}
	if rep.Spec.Placement == flotillav1.PlacementElect {
		if !primary {
			cs.Replicas, cs.ReadyReplicas = r.electedReplicas(ctx, rep, cluster)
		}
		return
	}
	var d appsv1.Deployment
	if err := live.Get(ctx, client.ObjectKey{Namespace: rep.Spec.ReplicationNamespace, Name: rep.Spec.DeploymentName}, &d); err == nil {
		cs.Replicas, cs.ReadyReplicas = d.Status.Replicas, d.Status.ReadyReplicas
	}
}

// electedReplicas counts the proxies of the Deployment bound to a cluster's virtual node, and
// those Ready (their status is their delegate's).
func (r *Reconciler) electedReplicas(ctx context.Context, rep *flotillav1.Replicator, cluster string) (total, ready int32) {
	var proxies corev1.PodList
	sel := replication.Selector(rep, nil).MatchLabels
	if err := r.Client.List(ctx, &proxies, client.InNamespace(rep.Spec.ReplicationNamespace), client.MatchingLabels(sel)); err != nil {
		return 0, 0
	}
	for _, p := range proxies.Items {
		if p.Spec.NodeName != flotillav1.VirtualNodeName(cluster) || p.DeletionTimestamp != nil {
			continue
		}
		total++
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return total, ready
}

// ensureNamespace creates the replication namespace where it is missing, marked as created by
// this Replicator; an existing one must be the Replicator's or opt in (NamespaceAllowed), and in a
// secondary also be writable by this primary.
func (r *Reconciler) ensureNamespace(ctx context.Context, in replication.Inputs, cluster string, primary bool, w client.Client, read client.Reader) (string, error) {
	rep := in.Replicator
	name := rep.Spec.ReplicationNamespace
	created := map[string]string{flotillav1.AnnotationCreatedBy: createdBy(in)}
	if !primary {
		var notAllowed *NamespaceNotAllowedError
		if _, err := checkNamespace(ctx, read, in, cluster, false); errors.As(err, &notAllowed) {
			return flotillav1.ReasonNamespaceNotAllowed, err
		} else if err != nil {
			return "", err
		}
		var notManaged *clusters.NamespaceNotManagedError
		made, err := clusters.EnsureManagedNamespace(ctx, w, cluster, name, in.PrimaryID, in.PodSecurityLabels, created)
		if errors.As(err, &notManaged) {
			return flotillav1.ReasonNamespaceNotManaged, err
		} else if err != nil {
			return "", err
		}
		if made {
			r.applied.ForgetPrefix(appliedPrefix(rep, cluster)) // what was in it went with it
		}
		return "", nil
	}
	var ns corev1.Namespace
	err := read.Get(ctx, client.ObjectKey{Name: name}, &ns)
	if apierrors.IsNotFound(err) {
		ns = corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, Annotations: created}}
		if rep.Spec.Placement == flotillav1.PlacementElect {
			ns.Labels[flotillav1.LabelEnabled] = "true"
		}
		if err := w.Create(ctx, &ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating namespace %s: %w", name, err)
		}
		r.applied.ForgetPrefix(appliedPrefix(rep, cluster))
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading namespace %s: %w", name, err)
	}
	if !NamespaceAllowed(&ns, createdBy(in), in.PrimaryID, true) {
		return flotillav1.ReasonNamespaceNotAllowed, &NamespaceNotAllowedError{Namespace: name, Cluster: cluster}
	}
	if rep.Spec.Placement == flotillav1.PlacementElect && ns.Labels[flotillav1.LabelEnabled] != "true" {
		return flotillav1.ReasonNamespaceNotEnabled, fmt.Errorf("namespace %s is not labelled %s=true: its pods cannot be elected", name, flotillav1.LabelEnabled)
	}
	return "", nil
}

// alreadyAsDesired says whether an object this process has no record of (it started, or was
// upgraded, since the last apply) is already as desired, by a dry run of its apply (ssa.WouldChange),
// and records it so: a restarted or upgraded manager then writes nothing that is already right.
// An object that cannot be read, or is not there, is applied as before.
func (r *Reconciler) alreadyAsDesired(ctx context.Context, at applyTarget, o *unstructured.Unstructured, key, hash, liveVersion string, readable bool) bool {
	if hash == "" || !readable || liveVersion == "" || r.applied.Known(key) {
		return false
	}
	change, err := ssa.WouldChange(ctx, at.w, o, flotillav1.FieldManagerReplicator)
	if err != nil || change {
		return false
	}
	r.applied.Record(key, hash, liveVersion, r.now())
	return true
}

// appliedKey names an object of a Replicator in a cluster in the ledger of what was applied.
func appliedKey(rep *flotillav1.Replicator, cluster string, gk schema.GroupKind, name string) string {
	return appliedPrefix(rep, cluster) + gk.String() + "/" + rep.Spec.ReplicationNamespace + "/" + name
}

// groupKindOf is the group and kind of what a Replicator's status says it applied.
func groupKindOf(a flotillav1.AppliedResource) schema.GroupKind {
	gvk, _ := appliedGVK(a)
	return schema.GroupKind{Group: gvk.Group, Kind: a.Kind}
}

func appliedPrefix(rep *flotillav1.Replicator, cluster string) string {
	return string(rep.UID) + "/" + cluster + "/"
}

func createdBy(in replication.Inputs) string { return in.PrimaryID + "/" + string(in.Replicator.UID) }
