package replicator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/ssa"
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
}

// Reconciler applies each Replicator to the primary, then to its targets in parallel, and
// reports per cluster what is applied.
type Reconciler struct {
	// Client writes to the primary and reads Replicators and proxies from the cache.
	Client client.Client
	// Live reads the primary without a cache (Deployments not yet Flotilla's, HPAs, the CA Secret).
	Live     client.Reader
	Registry Registry
	Recorder events.EventRecorder
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
func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

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
	res := Resolve(rep.Spec.TargetCluster, r.Registry.Snapshots())
	in := Inputs{Replicator: rep, PrimaryID: r.Registry.PrimaryID(), ElectClusters: res.Clusters}
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
	results := []placeResult{r.applyPrimary(ctx, in)}
	results[0].applied = append(results[0].applied, issued...)
	results = append(results, r.applyTargets(ctx, in, res.Clusters)...)
	results = append(results, r.prune(ctx, rep, results, res.Clusters)...)
	setStatus(rep, results, res)
	for _, pr := range results {
		if !pr.sync.Synced {
			r.event(rep, corev1.EventTypeWarning, flotillav1.ReasonApplyFailed, "Apply", "Cluster %s: %s", pr.sync.Name, pr.sync.Message)
		}
	}
	if rep.Status.Synced != flotillav1.SyncedTrue || meta.IsStatusConditionFalse(rep.Status.Conditions, flotillav1.ConditionReady) {
		return ctrl.Result{RequeueAfter: r.retry()}, nil
	}
	return ctrl.Result{RequeueAfter: r.resync()}, nil
}

// refuse reports a Replicator that writes nothing anywhere, and why: Synced and Ready False with
// the reason, and a Warning Event.
func (r *Reconciler) refuse(rep *flotillav1.Replicator, reason, msg string) {
	for _, t := range []string{flotillav1.ConditionSynced, flotillav1.ConditionReady} {
		meta.SetStatusCondition(&rep.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionFalse,
			Reason: reason, Message: msg, ObservedGeneration: rep.Generation})
	}
	rep.Status.Synced, rep.Status.ObservedGeneration = flotillav1.SyncedFalse, rep.Generation
	r.event(rep, corev1.EventTypeWarning, reason, "Apply", "%s", msg)
}

func (r *Reconciler) applyPrimary(ctx context.Context, in Inputs) placeResult {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	return r.applyPlace(ctx, in, PrimaryName, true, r.Client, r.Live)
}

// applyTargets applies to every secondary at once, each bounded by Timeout.
func (r *Reconciler) applyTargets(ctx context.Context, in Inputs, names []string) []placeResult {
	out := make([]placeResult, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sec, ok := r.Registry.Secondary(name)
			if !ok {
				out[i] = failed(name, "the cluster is not usable (not answering, or not a secondary)")
				return
			}
			cctx, cancel := context.WithTimeout(ctx, r.Timeout)
			defer cancel()
			out[i] = r.applyPlace(cctx, in, name, false, sec.Client, sec.Client)
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

// applyPlace ensures the namespace and applies every desired object in one cluster.
func (r *Reconciler) applyPlace(ctx context.Context, in Inputs, cluster string, primary bool, w client.Client, live client.Reader) placeResult {
	rep := in.Replicator
	pr := placeResult{sync: flotillav1.ClusterSync{Name: cluster, Role: roleOf(primary)}}
	if reason, err := r.ensureNamespace(ctx, in, cluster, primary, w, live); err != nil {
		pr.sync.Message, pr.problem = err.Error(), reason
		return pr
	}
	place := Place{Cluster: cluster, Primary: primary}
	if err := readLive(ctx, live, rep, &place); err != nil {
		pr.sync.Message = err.Error()
		return pr
	}
	objs, err := Desired(in, place)
	if err != nil {
		pr.sync.Message = err.Error()
		return pr
	}
	var failures []string
	for _, o := range objs {
		ar := flotillav1.AppliedResource{Cluster: cluster, Kind: o.GetKind(), Name: o.GetName(), ApplyStatus: flotillav1.ApplyStatusOK}
		if err := r.serviceAccountAllowed(ctx, live, in, place, o, objs); err != nil {
			ar.ApplyStatus, ar.Message = flotillav1.ApplyStatusFailed, err.Error()
			failures = append(failures, fmt.Sprintf("%s %s: %v", o.GetKind(), o.GetName(), err))
			pr.applied = append(pr.applied, ar)
			continue
		}
		foreign, liveRV, err := notOurs(ctx, live, rep, in.PrimaryID, o, place)
		if err != nil || foreign != "" {
			if err == nil {
				err = errors.New(foreign)
				r.event(rep, corev1.EventTypeWarning, flotillav1.ReasonObjectNotOurs, "Apply", "In %s, %s", cluster, foreign)
			}
			ar.ApplyStatus, ar.Message = flotillav1.ApplyStatusFailed, err.Error()
			failures = append(failures, fmt.Sprintf("%s %s: %v", o.GetKind(), o.GetName(), err))
			pr.applied = append(pr.applied, ar)
			continue
		}
		key := appliedKey(rep, cluster, o.GetKind(), o.GetName())
		hash, err := ssa.Hash(o.Object)
		readable := readableIn(o.GetKind(), primary)
		if err == nil && r.applied.Unchanged(key, hash, liveRV, readable, r.now(), blindReapply) {
			pr.applied = append(pr.applied, ar)
			continue
		}
		holder, err := ssa.Apply(ctx, w, o, flotillav1.FieldManagerReplicator, flotillav1.FieldManagerReflection)
		if err == nil && holder == "" && hash != "" {
			r.applied.Record(key, hash, o.GetResourceVersion(), r.now())
		} else {
			r.applied.Forget(key)
		}
		switch {
		case err != nil:
			ar.ApplyStatus, ar.Message = flotillav1.ApplyStatusFailed, err.Error()
			failures = append(failures, fmt.Sprintf("%s %s: %v", o.GetKind(), o.GetName(), err))
		case holder != "":
			ar.ApplyStatus, ar.Message = flotillav1.ApplyStatusDependencyCopy,
				"copied first by Flotilla's dependency reflection for the elected pods that use it, which keeps it in sync: left to it"
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
	return pr
}

// readableIn says whether Flotilla reads objects of a kind in a cluster: everything in the primary,
// and in a secondary all but the kinds it only writes (Secrets).
func readableIn(kind string, primary bool) bool {
	k, _ := flotillav1.ReplicatedKindOf(kind)
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
func notOurs(ctx context.Context, live client.Reader, rep *flotillav1.Replicator, primaryID string, o *unstructured.Unstructured, place Place) (foreign, liveRV string, err error) {
	primary := place.Primary
	if !readableIn(o.GetKind(), primary) {
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
	case have.GetLabels()[flotillav1.LabelReplicator] == LabelValue(rep.Name):
		return "", have.GetResourceVersion(), nil
	case !primary && have.GetAnnotations()[flotillav1.AnnotationOwner] == flotillav1.OwnerReflect && have.GetLabels()[flotillav1.LabelPrimary] == primaryID:
		// A dependency copy of this primary's (placement Elect: the delegates' ConfigMap and
		// Service): one owner per copy, the apply yields to reflection's field manager.
		return "", have.GetResourceVersion(), nil
	}
	if ssa.Holds(have, plumberFieldManager) {
		return "", have.GetResourceVersion(), nil
	}
	return fmt.Sprintf("%s %s/%s exists and is not this Replicator's: left alone (rename it, or delete it to let the Replicator create its own)",
		o.GetKind(), o.GetNamespace(), o.GetName()), "", nil
}

// plumberFieldManager is the field manager of what plumber applied.
const plumberFieldManager = "plumber"

func readLive(ctx context.Context, live client.Reader, rep *flotillav1.Replicator, place *Place) error {
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
func (r *Reconciler) readReplicas(ctx context.Context, in Inputs, cluster string, primary bool, live client.Reader, cs *flotillav1.ClusterSync) {
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
	sel := Selector(rep, nil).MatchLabels
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
func (r *Reconciler) ensureNamespace(ctx context.Context, in Inputs, cluster string, primary bool, w client.Client, read client.Reader) (string, error) {
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

// appliedKey names an object of a Replicator in a cluster in the ledger of what was applied.
func appliedKey(rep *flotillav1.Replicator, cluster, kind, name string) string {
	return appliedPrefix(rep, cluster) + kind + "/" + rep.Spec.ReplicationNamespace + "/" + name
}

func appliedPrefix(rep *flotillav1.Replicator, cluster string) string {
	return string(rep.UID) + "/" + cluster + "/"
}

func createdBy(in Inputs) string { return in.PrimaryID + "/" + string(in.Replicator.UID) }

// prune deletes what this Replicator applied before and no longer wants: objects dropped from
// its spec, and everything in clusters no longer targeted. Nothing is deleted in a cluster whose
// pass stopped early (what it applied there stays listed, so it is known later); a cluster no
// longer targeted whose cleanup fails stays in the status until it succeeds. It returns the
// results to add for those clusters.
func (r *Reconciler) prune(ctx context.Context, rep *flotillav1.Replicator, results []placeResult, targets []string) []placeResult {
	wanted, complete := map[string]bool{}, map[string]bool{}
	for i := range results {
		pr := &results[i]
		complete[pr.sync.Name] = len(pr.applied) > 0 || pr.sync.Synced
		for _, a := range pr.applied {
			wanted[a.Cluster+"/"+a.Kind+"/"+a.Name] = true
		}
		if !complete[pr.sync.Name] {
			pr.applied = remembered(rep, pr.sync.Name, pr.sync.Message)
		}
	}
	targeted := map[string]bool{PrimaryName: true}
	for _, t := range targets {
		targeted[t] = true
	}
	for _, a := range rep.Status.Applied {
		if !targeted[a.Cluster] || !complete[a.Cluster] || wanted[a.Cluster+"/"+a.Kind+"/"+a.Name] {
			continue
		}
		if acc, ok := r.accessTo(a.Cluster); ok {
			cctx, cancel := context.WithTimeout(ctx, r.Timeout)
			err := deleteApplied(cctx, acc, rep, a)
			cancel()
			r.applied.Forget(appliedKey(rep, a.Cluster, a.Kind, a.Name))
			if err != nil {
				// It stays listed as applied, so the next pass deletes it again.
				r.event(rep, corev1.EventTypeWarning, flotillav1.ReasonApplyFailed, "Prune",
					"Cluster %s: removing %s %s, no longer wanted, failed: %v", a.Cluster, a.Kind, a.Name, err)
				keepListed(results, a)
			}
		}
	}
	var leftovers []placeResult
	for _, c := range rep.Status.Clusters {
		if targeted[c.Name] {
			continue
		}
		err := fmt.Errorf("not answering")
		if acc, ok := r.accessTo(c.Name); ok {
			cctx, cancel := context.WithTimeout(ctx, r.Timeout)
			err = r.cleanCluster(cctx, acc, rep, c.Name)
			cancel()
		}
		if err != nil {
			msg := "no longer targeted; removing what was applied failed: " + err.Error()
			leftovers = append(leftovers, placeResult{sync: flotillav1.ClusterSync{Name: c.Name, Role: c.Role, Message: msg},
				applied: remembered(rep, c.Name, msg)})
		}
	}
	return leftovers
}

// keepListed keeps an object whose removal failed in its cluster's applied list.
func keepListed(results []placeResult, a flotillav1.AppliedResource) {
	for i := range results {
		if results[i].sync.Name == a.Cluster {
			results[i].applied = append(results[i].applied, a)
			return
		}
	}
}

// remembered is what the status says was applied in a cluster, marked not applied now.
func remembered(rep *flotillav1.Replicator, cluster, msg string) []flotillav1.AppliedResource {
	var out []flotillav1.AppliedResource
	for _, a := range rep.Status.Applied {
		if a.Cluster == cluster {
			a.ApplyStatus, a.Message = flotillav1.ApplyStatusFailed, msg
			out = append(out, a)
		}
	}
	return out
}

// access is how Flotilla writes to and reads (uncached) one cluster.
type access struct {
	w       client.Client
	read    client.Reader
	primary bool
}

// accessTo reaches a cluster named in a Replicator's status.
func (r *Reconciler) accessTo(cluster string) (access, bool) {
	if cluster == PrimaryName {
		return access{w: r.Client, read: r.Live, primary: true}, true
	}
	sec, ok := r.Registry.Secondary(cluster)
	return access{w: sec.Client, read: sec.Client}, ok
}

// deleteApplied deletes one object this Replicator applied (only if it still carries its label).
func deleteApplied(ctx context.Context, acc access, rep *flotillav1.Replicator, a flotillav1.AppliedResource) error {
	kind, ok := flotillav1.ReplicatedKindOf(a.Kind)
	if !ok || a.ApplyStatus == flotillav1.ApplyStatusDependencyCopy {
		return nil // a dependency copy is reflection's to remove
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind.GroupVersionKind())
	u.SetNamespace(rep.Spec.ReplicationNamespace)
	u.SetName(a.Name)
	if readableIn(a.Kind, a.Cluster == PrimaryName) {
		if err := acc.read.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			return client.IgnoreNotFound(err)
		}
		if u.GetLabels()[flotillav1.LabelReplicator] != LabelValue(rep.Name) || (a.Cluster != PrimaryName && ssa.Holds(u, flotillav1.FieldManagerReflection)) {
			return nil // someone else's now, or shared with reflection (which removes it when unused)
		}
	}
	// In a secondary, Secrets are never read: the admission policy lets Flotilla delete only
	// those carrying its primary label.
	if err := acc.w.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s in %s: %w", a.Kind, a.Name, a.Cluster, err)
	}
	return nil
}

func (r *Reconciler) event(rep *flotillav1.Replicator, kind, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(rep, nil, kind, reason, action, format, args...)
	}
}

// setStatus composes plumber's applied[] and synced, the per-cluster state and the conditions.
func setStatus(rep *flotillav1.Replicator, results []placeResult, res Resolution) {
	st := &rep.Status
	st.ObservedGeneration = rep.Generation
	st.Applied, st.Clusters = nil, nil
	synced := 0
	var problems []string
	notReady := 0
	for _, pr := range results {
		st.Applied = append(st.Applied, pr.applied...)
		st.Clusters = append(st.Clusters, pr.sync)
		if pr.sync.Synced {
			synced++
		} else {
			problems = append(problems, pr.sync.Name+": "+pr.sync.Message)
		}
		if pr.sync.ReadyReplicas < pr.sync.Replicas {
			notReady++
		}
	}
	sort.SliceStable(st.Applied, func(i, j int) bool { return clusterOrder(st.Applied[i].Cluster) < clusterOrder(st.Applied[j].Cluster) })
	st.ClusterCount = fmt.Sprintf("%d/%d", synced, len(results))
	cond := metav1.Condition{Type: flotillav1.ConditionSynced, Status: metav1.ConditionTrue, Reason: flotillav1.ReasonSynced,
		Message: fmt.Sprintf("Applied in %d cluster(s)", synced), ObservedGeneration: rep.Generation}
	switch {
	case res.Problem() != "":
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, flotillav1.ReasonUnknownTargets, "targetCluster: "+res.Problem()
	case len(problems) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, flotillav1.ReasonApplyFailed
		cond.Message = fmt.Sprintf("%d of %d cluster(s) not synced: %s", len(problems), len(results), joinShort(problems))
		for _, pr := range results {
			if pr.problem != "" {
				cond.Reason = pr.problem
			}
		}
	}
	st.Synced = flotillav1.SyncedTrue
	if cond.Status != metav1.ConditionTrue {
		st.Synced = flotillav1.SyncedFalse
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	ready := metav1.Condition{Type: flotillav1.ConditionReady, Status: metav1.ConditionTrue, Reason: flotillav1.ReasonReplicasReady,
		Message: "The Deployment's replicas are ready in every cluster", ObservedGeneration: rep.Generation}
	switch {
	case rep.Spec.DeploymentSpec == nil:
		ready.Reason, ready.Message = flotillav1.ReasonNoDeployment, "No Deployment to run"
	case notReady > 0 || cond.Status != metav1.ConditionTrue:
		ready.Status, ready.Reason = metav1.ConditionFalse, flotillav1.ReasonReplicasNotReady
		ready.Message = fmt.Sprintf("Replicas not ready (or not applied) in %d cluster(s)", max(notReady, len(problems)))
	}
	meta.SetStatusCondition(&st.Conditions, ready)
}

func clusterOrder(name string) string {
	if name == PrimaryName {
		return ""
	}
	return name
}

func joinShort(list []string) string {
	const most = 3
	if len(list) <= most {
		return fmt.Sprint(list)
	}
	return fmt.Sprintf("%v and %d more", list[:most], len(list)-most)
}
