package proxy

import (
	"cmp"
	"context"
	"encoding/json"

	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/clusters/views"
	"github.com/flotilla-dev/flotilla/pkg/copies"
	"github.com/flotilla-dev/flotilla/pkg/delegates"
	"github.com/flotilla-dev/flotilla/pkg/overrides"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/seal"
	"github.com/flotilla-dev/flotilla/pkg/tracing"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

const (
	transientRetry = 2 * time.Second
	// dependencyRetry is when ephemeral containers waiting for a dependency are tried again (an
	// Event each time says what they wait for).
	dependencyRetry = 10 * time.Second
	// budgetRetry is when a proxy whose secondary's budget is used up is tried again.
	budgetRetry = 500 * time.Millisecond
	// pendingRetryFloor and pendingRetryCeiling bound pendingBackoff.
	pendingRetryFloor   = 250 * time.Millisecond
	pendingRetryCeiling = 30 * time.Second
	// deleteRecheckCeiling bounds deleteRecheck: a secondary that lost the delegate's deletion
	// event without a relist is looked at again within it.
	deleteRecheckCeiling = 30 * time.Second
)

// Secondaries is what the proxy reconciler needs of the cluster registry.
type Secondaries interface {
	Secondary(name string) (clusters.Secondary, bool)
	PrimaryID() string
	FilteredSource(w clusters.Watch, h handler.EventHandler, news func(old, obj client.Object) bool) source.Source
	StartSource(w clusters.Watch, h handler.EventHandler) source.Source
}

// Reconciler makes each proxy pod bound to a virtual node have its delegate in that
// secondary, feeds the delegate's status back, and deletes the delegate before the proxy.
type Reconciler struct {
	Client      client.Client
	Secondaries Secondaries
	Recorder    events.EventRecorder
	// Reflector copies the delegates' ConfigMaps, Secrets and ServiceAccounts to their secondary.
	Reflector *copies.Reflector
	// FlatNetwork reports delegates' IPs in the proxies' status (--pod-network=flat).
	FlatNetwork bool
	// Views gathers the clusters placement.Refit judges a proxy the webhook gated (because none
	// fitted it) against, as the webhook judged it; nil leaves gated proxies gated.
	Views *views.Gatherer
	// SealKey verifies the webhook's seal on a proxy before its delegate is created (pkg/seal):
	// without it, no delegate is created.
	SealKey seal.Key
	// Clock tells grace periods and condition times (default: the real one).
	Clock clock.PassiveClock
	// Dependencies bring back Pending proxies when what they wait for appears in the primary.
	Dependencies []source.Source
	// Tracer starts the spans of a proxy's work (nil: none).
	Tracer trace.Tracer
	// QuietStart is how long a delegate this process created may simply start before its proxy's
	// status is written (the manager gives DefaultQuietStart unless --quiet-start says otherwise);
	// zero: none, a delegate's Pending is written as soon as it is seen, Running in a second write.
	QuietStart time.Duration
	// Workloads reads the Workload (scheduling.k8s.io/v1alpha1, Kubernetes 1.35) or the PodGroup
	// (v1alpha2 or v1beta1, 1.36+) whose pod group a gang's member names, uncached (the manager's
	// APIReader): read only while a member waits, from APIs few primaries serve yet. nil: members
	// that name one are placed one by one.
	Workloads client.Reader
	// PerCluster bounds the reconciles working on one secondary at once (default 16; the manager
	// gives half its workers): a secondary that answers slowly, or not at all until its probes say so, cannot take
	// the workers the others need.
	PerCluster int

	budgets sync.Map // cluster name -> chan struct{} of capacity PerCluster
	// gangs serializes the placement of each gang (namespace/name -> *sync.Mutex): its members'
	// reconciles would otherwise each decide, and could send parts of it to different clusters.
	gangs sync.Map

	// readyNamespaces remembers "cluster/namespace" pairs known to be managed and to have their
	// default ServiceAccount, with the Pod Security labels they were given: checked once, not for
	// every pod (forgotten when a create says the namespace is gone, forgetNamespace).
	readyNamespaces sync.Map
	// allowanceWanted remembers, per "cluster/namespace", when the lender there was last told the
	// namespace wants room (wantAllowance).
	allowanceWanted sync.Map

	// allocations remembers, by proxy UID, the delegate whose devices its proxy shows
	// (showAllocation).
	allocations sync.Map
	// events remembers what of each delegate's Events its proxy already shows.
	events eventForwarding

	// own remembers this reconciler's last write to each proxy until the cache shows it.
	own ownWrites

	// starts follows each proxy's start until its status says Running (metrics.go).
	starts starts

	// running is the controller while it runs (keepRunning): afterQuietStart brings proxies back
	// to its queue.
	running atomic.Pointer[running]
	// cache reads proxies for the delegate watch's filter (delegateNews).
	cache client.Reader
}

// Reconcile is one pass over one proxy. What it decides for the proxy's status (Pending with a
// reason, Failed, the delegate's status) is written once, by the deferred patch.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	proxy := &corev1.Pod{}
	if err := r.Client.Get(ctx, req.NamespacedName, proxy); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if letGo := r.own.recall(proxy); letGo {
		return ctrl.Result{}, nil
	}
	cluster, ok := flotillav1.ClusterOfNode(proxy.Spec.NodeName)
	ctx, span := r.trace(ctx, spanReconcile, proxy, cluster)
	defer func() {
		outcome(span, proxy)
		tracing.End(span, reterr)
	}()
	if !ok {
		return r.reconcileUnbound(ctx, proxy)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("cluster", cluster))
	base := proxy.DeepCopy()
	defer func() {
		if err := r.patchStatus(ctx, base, proxy); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()
	if !proxy.DeletionTimestamp.IsZero() {
		if released, err := r.releaseWithoutDelegate(ctx, proxy); released || err != nil {
			return ctrl.Result{}, err
		}
	}
	sec, ok := r.Secondaries.Secondary(cluster)
	if !ok {
		return r.pending(proxy, flotillav1.ReasonSecondaryUnavailable, fmt.Sprintf("Secondary cluster %s is not usable", cluster))
	}
	if !sec.Running {
		// No calls to a secondary that does not answer: each would hold a worker the others need.
		// Its proxies come back when its informers start again (StartSource).
		return r.pending(proxy, flotillav1.ReasonSecondaryUnavailable, fmt.Sprintf("Secondary cluster %s does not answer", cluster))
	}
	release, ok := r.budget(cluster)
	if !ok {
		return ctrl.Result{RequeueAfter: budgetRetry}, nil
	}
	defer release()
	if !proxy.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, proxy, sec)
	}
	return r.reconcileNormal(ctx, proxy, sec)
}

func (r *Reconciler) reconcileNormal(ctx context.Context, proxy *corev1.Pod, sec clusters.Secondary) (ctrl.Result, error) {
	if translate.Terminal(proxy) {
		return ctrl.Result{}, nil
	}
	delegate, synced, err := delegates.Get(sec, proxy.Namespace, proxy.Name)
	if err != nil || !synced {
		return ctrl.Result{RequeueAfter: transientRetry}, err
	}
	if delegate != nil && delegate.Annotations[flotillav1.AnnotationProxyUID] != string(proxy.UID) {
		// Same name, another incarnation (a StatefulSet pod recreated): the old delegate goes first.
		if delegate.DeletionTimestamp.IsZero() {
			if err := r.deleteDelegate(ctx, sec, delegate, nil); err != nil {
				return ctrl.Result{}, err
			}
		}
		return r.pending(proxy, flotillav1.ReasonPreviousIncarnationTerminating, "The delegate of the previous pod of this name is terminating")
	}
	if delegate == nil {
		if wasDelegated(proxy) {
			// Proven gone by a GET, not only by the cache (a relist could be behind).
			var live corev1.Pod
			err := sec.Client.Get(ctx, client.ObjectKey{Namespace: proxy.Namespace, Name: proxy.Name}, &live)
			if err == nil || !apierrors.IsNotFound(err) {
				return ctrl.Result{RequeueAfter: transientRetry}, client.IgnoreNotFound(err)
			}
			return r.delegateLost(ctx, proxy, sec.Name)
		}
		if why := notAdmitted(proxy, sec.Name, r.SealKey); why != "" {
			msg := fmt.Sprintf("Flotilla gives this pod no delegate: %s", why)
			r.event(proxy, corev1.EventTypeWarning, flotillav1.ReasonNotAdmitted, "Create", "%s", msg)
			return r.fail(proxy, flotillav1.ReasonNotAdmitted, msg)
		}
		return r.createDelegate(ctx, proxy, sec)
	}
	if err := r.keepPodSecurity(ctx, proxy, sec); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.updateImages(ctx, sec, proxy, delegate); err != nil {
		return ctrl.Result{}, err
	}
	if waiting, err := r.addEphemeralContainers(ctx, sec, proxy, delegate); err != nil || waiting {
		if err == nil {
			return ctrl.Result{RequeueAfter: dependencyRetry}, nil
		}
		return ctrl.Result{}, err
	}
	if err := r.resize(ctx, sec, proxy, delegate); err != nil {
		return ctrl.Result{}, err
	}
	r.mirrorStatus(proxy, delegate)
	r.showAllocation(ctx, sec, proxy, delegate)
	if r.inQuietStart(proxy, delegate) {
		return ctrl.Result{}, nil // its Events are looked at when the window ends (afterQuietStart)
	}
	return ctrl.Result{RequeueAfter: r.forwardEvents(ctx, sec, proxy, delegate)}, nil
}

// updateImages carries a changed container image of the proxy (`kubectl set image` on a bare
// pod: the one change Kubernetes allows to a running pod's containers) to its delegate.
func (r *Reconciler) updateImages(ctx context.Context, sec clusters.Secondary, proxy, delegate *corev1.Pod) error {
	updates := translate.ImageUpdates(proxy, delegate)
	if len(updates) == 0 {
		return nil // the common pass: no Override read
	}
	// The images the proxy's containers have as this cluster's Overrides rewrite them: an
	// override's registry is not a change to carry back.
	want, err := r.overridden(ctx, proxy, proxy, sec.Name)
	if err != nil {
		// Not known what this cluster's images should be (a rule that cannot apply now): the
		// delegate keeps its own rather than lose an override's.
		return nil //nolint:nilerr // said when a delegate is created; nothing to carry now
	}
	updates = translate.ImageUpdates(want, delegate)
	return r.changeDelegate(ctx, sec, proxy, delegate, len(updates) > 0, "", "Update", "images updated", func(d *corev1.Pod) {
		for _, list := range [][]corev1.Container{d.Spec.InitContainers, d.Spec.Containers} {
			for i := range list {
				if img, ok := updates[list[i].Name]; ok {
					list[i].Image = img
				}
			}
		}
	})
}

// addEphemeralContainers carries `kubectl debug` on a proxy to its delegate: the ephemeral
// containers the delegate lacks, through its ephemeralcontainers subresource. Their statuses come
// back with the delegate's, so `kubectl debug -it` attaches to the one in the secondary. What
// their env names resolves as for the pod's own containers: copied from the primary, an optional
// reference to anything not copied dropped, a required one waited for (a Warning Event says
// which; true: look again later), never the secondary's own object of that name. One container
// that waits holds no other back.
func (r *Reconciler) addEphemeralContainers(ctx context.Context, sec clusters.Secondary, proxy, delegate *corev1.Pod) (bool, error) {
	added := translate.NewEphemeralContainers(proxy, delegate)
	if len(added) == 0 || !delegate.DeletionTimestamp.IsZero() {
		return false, nil
	}
	var ready []corev1.EphemeralContainer
	waiting := false
	for _, c := range added {
		why, err := r.ephemeralDependencies(ctx, sec, proxy, &c)
		if err != nil {
			return false, err
		}
		if why != "" {
			waiting = true
			r.event(proxy, corev1.EventTypeWarning, flotillav1.ReasonWaitingForDependencies, "Update", "Ephemeral container %s waits for %s", c.Name, why)
			continue
		}
		ready = append(ready, c)
	}
	return waiting, r.changeDelegate(ctx, sec, proxy, delegate, len(ready) > 0, "ephemeralcontainers", "Update", "ephemeral container(s) added", func(d *corev1.Pod) {
		d.Spec.EphemeralContainers = append(d.Spec.EphemeralContainers, ready...)
	})
}

// ephemeralDependencies copies what one ephemeral container's env names to the secondary and
// keeps, in c, only the references copied (KeepCopied); it says what a required one waits for.
func (r *Reconciler) ephemeralDependencies(ctx context.Context, sec clusters.Secondary, proxy *corev1.Pod, c *corev1.EphemeralContainer) (string, error) {
	var copied translate.Copied
	if r.Reflector != nil {
		// Only this container's references, in the proxy's namespace and as its service account.
		one := &corev1.Pod{ObjectMeta: proxy.ObjectMeta, Spec: corev1.PodSpec{ServiceAccountName: proxy.Spec.ServiceAccountName,
			EphemeralContainers: []corev1.EphemeralContainer{*c}}}
		var err error
		copied, err = r.Reflector.Ensure(ctx, sec.Client, one, translate.Owner(r.Secondaries.PrimaryID(), sec.OwnerUID))
		var missing *copies.Missing
		switch {
		case errors.As(err, &missing):
			return fmt.Sprintf("%s %s: %s", missing.Kind, missing.Name, cmp.Or(missing.Why, "it does not exist in the primary")), nil
		case err != nil:
			return "", fmt.Errorf("copying ephemeral container %s's dependencies to %s: %w", c.Name, sec.Name, err)
		}
	}
	spec := corev1.PodSpec{EphemeralContainers: []corev1.EphemeralContainer{*c}}
	if uncopied := translate.KeepCopied(&spec, copied); len(uncopied) > 0 {
		return fmt.Sprintf("%s to be copied to %s", strings.Join(uncopied, ", "), sec.Name), nil
	}
	*c = spec.EphemeralContainers[0]
	return "", nil
}

// resize carries an in-place resize of the proxy to its delegate, through the delegate's resize
// subresource: the secondary's kubelet resizes the container, and its progress (the pod's resize
// conditions, the containers' resources in their statuses) comes back with the delegate's status.
func (r *Reconciler) resize(ctx context.Context, sec clusters.Secondary, proxy, delegate *corev1.Pod) error {
	updates := translate.ResourceUpdates(proxy, delegate)
	return r.changeDelegate(ctx, sec, proxy, delegate, len(updates) > 0, "resize", "Resize", "resources resized", func(d *corev1.Pod) {
		for i := range d.Spec.Containers {
			if res, ok := updates[d.Spec.Containers[i].Name]; ok {
				d.Spec.Containers[i].Resources.Requests, d.Spec.Containers[i].Resources.Limits = res.Requests, res.Limits
			}
		}
	})
}

// changeDelegate makes on a live delegate a change Kubernetes allows on a running pod, when there
// is one: a strategic-merge patch under optimistic lock, of the pod or of one of its subresources,
// and an Event on the proxy. A change the secondary refuses (invalid, forbidden: say, a resize
// that would change the QoS class) is a Warning Event, not an error retried in a loop.
func (r *Reconciler) changeDelegate(ctx context.Context, sec clusters.Secondary, proxy, delegate *corev1.Pod, due bool,
	subresource, action, done string, change func(*corev1.Pod)) error {
	if !due || !delegate.DeletionTimestamp.IsZero() {
		return nil
	}
	patched := delegate.DeepCopy()
	change(patched)
	patch := client.StrategicMergeFrom(delegate, client.MergeFromWithOptimisticLock{})
	var err error
	if subresource == "" {
		err = sec.Client.Patch(ctx, patched, patch)
	} else {
		err = sec.Client.SubResource(subresource).Patch(ctx, patched, patch)
	}
	switch {
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
		r.event(proxy, corev1.EventTypeWarning, flotillav1.ReasonDelegateUpdated, action, "Cluster %s refused the delegate's change (%s): %v", sec.Name, done, err)
		return nil
	case err != nil:
		return fmt.Errorf("changing the delegate in %s (%s): %w", sec.Name, done, err)
	}
	r.event(proxy, corev1.EventTypeNormal, flotillav1.ReasonDelegateUpdated, action, "Delegate's %s in cluster %s", done, sec.Name)
	return nil
}

// overridden is the delegate as the Overrides of its namespace (and the ClusterOverrides) make
// it for this cluster, annotated with the rules that applied; the delegate itself when none do.
func (r *Reconciler) overridden(ctx context.Context, proxy, delegate *corev1.Pod, cluster string) (*corev1.Pod, error) {
	sources, err := views.Overrides(ctx, r.Client, proxy.Namespace)
	if err != nil || len(sources) == 0 {
		return delegate, err
	}
	c, err := views.OverrideCluster(ctx, r.Client, cluster)
	if err != nil {
		return delegate, err
	}
	out, applied, err := overrides.ApplyPod(delegate, overrides.PodSubject(proxy), c, sources)
	if err != nil || len(applied) == 0 {
		return delegate, err
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[flotillav1.AnnotationOverrides] = overrides.Names(applied)
	return out, nil
}

// allowanceRefused says whether a secondary refused a delegate for want of room in what it lends
// this primary: its lender's quota is full, or not yet in force in the namespace.
func allowanceRefused(err error) bool {
	return apierrors.IsForbidden(err) && (strings.Contains(err.Error(), "exceeded quota: "+flotillav1.AllowanceQuotaName) ||
		strings.Contains(err.Error(), "its lender has not yet put the quota"))
}

// wantAllowanceEvery bounds how often the primary says, per secondary namespace, that it wants room.
const wantAllowanceEvery = 5 * time.Second

// wantAllowance tells the secondary's lender that this namespace wants room (its
// flotilla.dev/allowance-wanted annotation), at most every wantAllowanceEvery: the lender gives
// what is free to the namespaces that want it. Best effort: a failure is retried with the proxy.
func (r *Reconciler) wantAllowance(ctx context.Context, sec clusters.Secondary, namespace string) {
	key, now := sec.Name+"/"+namespace, r.now()
	if last, ok := r.allowanceWanted.Load(key); ok && now.Sub(last.(time.Time)) < wantAllowanceEvery {
		return
	}
	r.allowanceWanted.Store(key, now)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, flotillav1.AnnotationAllowanceWanted, now.UTC().Format(time.RFC3339))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := sec.Client.Patch(ctx, ns, client.RawPatch(types.MergePatchType, patch)); err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Cannot tell the secondary's lender the namespace wants room", "cluster", sec.Name, "namespace", namespace, "error", err.Error())
	}
}

// missingPriorityClass says whether a secondary refused a delegate for a priority class it lacks.
func missingPriorityClass(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "no PriorityClass with name")
}

// createDelegate creates the namespace (managed-by label) and the delegate, for a proxy
// notAdmitted let through; what fails for now leaves the proxy Pending with the reason and is
// retried.
func (r *Reconciler) createDelegate(ctx context.Context, proxy *corev1.Pod, sec clusters.Secondary) (ctrl.Result, error) {
	primaryID := r.Secondaries.PrimaryID()
	// Nothing in a request is trusted: only a proxy in a namespace opted in to election gets a
	// delegate (the admission policy refuses proxies made elsewhere, this holds without it).
	var home corev1.Namespace
	if err := r.Client.Get(ctx, client.ObjectKey{Name: proxy.Namespace}, &home); err != nil {
		return ctrl.Result{}, fmt.Errorf("reading namespace %s: %w", proxy.Namespace, err)
	}
	if home.Labels[flotillav1.LabelEnabled] != "true" {
		return r.pending(proxy, flotillav1.ReasonNamespaceNotEnabled, fmt.Sprintf("Namespace %s is not labelled %s=true", proxy.Namespace, flotillav1.LabelEnabled))
	}
	if reason, msg, err := r.ensureNamespace(ctx, proxy.Namespace, translate.PodSecurityLabels(home.Labels), sec); err != nil || reason != "" {
		if err != nil {
			return ctrl.Result{}, err
		}
		return r.pending(proxy, reason, msg)
	}
	if sec.OwnerUID == "" {
		return r.pending(proxy, flotillav1.ReasonWaitingForDependencies, fmt.Sprintf("Waiting for FlotillaPrimary %s in %s", primaryID, sec.Name))
	}
	if reason, msg, err := r.claimsNotReady(ctx, proxy, sec); err != nil || reason != "" {
		if err != nil {
			return ctrl.Result{}, err
		}
		return r.pending(proxy, reason, msg)
	}
	ownerRef := translate.Owner(primaryID, sec.OwnerUID)
	var copied translate.Copied
	if r.Reflector != nil {
		var err error
		cctx, span := r.trace(ctx, spanDependencies, proxy, sec.Name)
		copied, err = r.Reflector.Ensure(cctx, sec.Client, proxy, ownerRef)
		tracing.End(span, err)
		if err != nil {
			return r.copyFailed(proxy, sec, err)
		}
	}
	delegate, err := translate.Delegate(proxy, primaryID, ownerRef)
	if err != nil {
		return r.fail(proxy, flotillav1.ReasonDelegateRejected, err.Error())
	}
	// What this cluster gets may differ: the Overrides (before the checks below, which judge the
	// result). One that cannot apply keeps the proxy Pending, the delegate not made half-changed.
	delegate, err = r.overridden(ctx, proxy, delegate, sec.Name)
	var failed *overrides.Failure
	switch {
	case errors.As(err, &failed):
		msg := fmt.Sprintf("For cluster %s, %v: fix or remove the rule (the delegate is created then)", sec.Name, failed)
		if proxy.Status.Message != msg {
			r.event(proxy, corev1.EventTypeWarning, flotillav1.ReasonOverrideFailed, "Create", "%s", msg)
			if err := views.RecordOverrideFailure(ctx, r.Client, failed, "pod "+proxy.Namespace+"/"+proxy.Name, sec.Name); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Cannot say on the override that a rule cannot apply")
			}
		}
		return r.pending(proxy, flotillav1.ReasonOverrideFailed, msg)
	case err != nil:
		return ctrl.Result{}, err
	}
	// Every ConfigMap or Secret the delegate names is one copied in this pass: an optional
	// reference to anything else is dropped, so that it never resolves to the secondary's own
	// object of that name.
	if uncopied := translate.KeepCopied(&delegate.Spec, copied); len(uncopied) > 0 {
		return r.pending(proxy, flotillav1.ReasonWaitingForDependencies, fmt.Sprintf("Waiting for %s to be copied to %s", strings.Join(uncopied, ", "), sec.Name))
	}
	// The constraints annotation is checked again: what the delegate gets must pass the
	// namespace's Pod Security level, whoever wrote the annotation.
	if v := translate.PodSecurityViolation(&delegate.ObjectMeta, &delegate.Spec, home.Labels); v != "" {
		return r.fail(proxy, flotillav1.ReasonDelegateRejected, fmt.Sprintf("The delegate %s (the level of namespace %s)", v, proxy.Namespace))
	}
	return r.create(ctx, proxy, sec, delegate)
}

// claimsNotReady says what a delegate's claims wait for (a reason and a message; "" when none):
// a delegate mounts whatever claim of that name its namespace in the secondary has, so each claim
// it names must be this primary's real claim of the primary claim of that name, which must be of
// class flotilla. Never another team's claim there, whoever made the proxy and whatever the
// webhook saw (a claim missing at admission, one deleted and made again since). Read live: once
// per creation attempt, and what a cache selected by this primary's label lacks proves nothing.
func (r *Reconciler) claimsNotReady(ctx context.Context, proxy *corev1.Pod, sec clusters.Secondary) (string, string, error) {
	for _, name := range translate.VolumeClaims(proxy) {
		key := client.ObjectKey{Namespace: proxy.Namespace, Name: name}
		var pvc corev1.PersistentVolumeClaim
		if err := r.Client.Get(ctx, key, &pvc); err != nil {
			if apierrors.IsNotFound(err) {
				return flotillav1.ReasonWaitingForClaim, fmt.Sprintf("Waiting for claim %s in the primary", name), nil
			}
			return "", "", fmt.Errorf("reading claim %s: %w", name, err)
		}
		if !translate.RemoteClaim(&pvc) {
			return flotillav1.ReasonWaitingForClaim, fmt.Sprintf("Claim %s is of storage class %q, whose data stays in this cluster: only claims of class %s follow an elected pod",
				name, ptr.Deref(pvc.Spec.StorageClassName, ""), flotillav1.StorageClassRemote), nil
		}
		var real corev1.PersistentVolumeClaim
		err := sec.Client.Get(ctx, key, &real)
		switch {
		case apierrors.IsNotFound(err):
			r.namespaceGone(ctx, sec, proxy.Namespace)
			return flotillav1.ReasonWaitingForClaim, fmt.Sprintf("Waiting for Flotilla's claim %s in cluster %s", name, sec.Name), nil
		case err != nil:
			return "", "", fmt.Errorf("reading claim %s in %s: %w", name, sec.Name, err)
		case !translate.RealClaimOf(&real, &pvc, r.Secondaries.PrimaryID()):
			return flotillav1.ReasonNameConflict, fmt.Sprintf("Cluster %s has a claim %s that is not Flotilla's claim of this one: it is left alone, and the pod waits", sec.Name, name), nil
		}
	}
	return "", "", nil
}

// create creates the delegate in the secondary; what the secondary refuses leaves the proxy Pending
// (or Failed, for good) with the reason, and is counted.
func (r *Reconciler) create(ctx context.Context, proxy *corev1.Pod, sec clusters.Secondary, delegate *corev1.Pod) (ctrl.Result, error) {
	cctx, span := r.trace(ctx, spanCreate, proxy, sec.Name)
	err := sec.Client.Create(cctx, delegate)
	tracing.End(span, err)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		countCreationError(sec.Name, err) // a name taken by another's pod is counted by alreadyThere
	}
	switch {
	case err == nil:
		r.starts.delegateCreated(proxy, sec.Name, r.now())
		r.afterQuietStart(proxy)
		r.event(proxy, corev1.EventTypeNormal, flotillav1.ReasonDelegateCreated, "Create", "Delegate created in cluster %s", sec.Name)
		// No status write here: the status that comes back when the delegate runs (or when its
		// quiet start ends) carries the Delegated condition; one write per proxy. Only a reason
		// an earlier pass wrote (what it waited for) is cleared now: it is no longer true. A
		// reconcile that runs before the cache shows the delegate gets AlreadyExists and waits.
		if proxy.Status.Reason != "" || proxy.Status.Message != "" {
			proxy.Status.Reason, proxy.Status.Message = "", ""
			proxy.Status.Conditions = withCondition(proxy.Status.Conditions, r.delegatedCondition(proxy, r.now()))
		}
		return ctrl.Result{}, nil
	case apierrors.IsAlreadyExists(err):
		return r.alreadyThere(ctx, proxy, sec, delegate)
	case missingPriorityClass(err):
		return r.pending(proxy, flotillav1.ReasonPriorityClassMissing, fmt.Sprintf(
			"Cluster %s has no PriorityClass %s: an admin of %s may create it (the delegate is created then)", sec.Name, delegate.Spec.PriorityClassName, sec.Name))
	case allowanceRefused(err):
		r.wantAllowance(ctx, sec, proxy.Namespace)
		return r.pending(proxy, flotillav1.ReasonAllowanceExceeded, fmt.Sprintf(
			"Cluster %s lends this primary a limited part of itself and has no room in namespace %s now (the delegate is created when its lender gives room): %v", sec.Name, proxy.Namespace, err))
	case permanent(err):
		return r.fail(proxy, flotillav1.ReasonDelegateRejected, fmt.Sprintf("Cluster %s refused the delegate: %v", sec.Name, err))
	default:
		if apierrors.IsNotFound(err) {
			r.forgetNamespace(sec.Name, proxy.Namespace) // deleted there meanwhile
		}
		// The namespace's default ServiceAccount not there yet, a quota, a webhook outage...
		return r.pending(proxy, flotillav1.ReasonWaitingForDependencies, fmt.Sprintf("Creating the delegate in %s: %v", sec.Name, err))
	}
}

// copyFailed keeps a proxy Pending, with the reason, when its dependencies could not be copied to
// its secondary: one missing in the primary (named in an Event), a ServiceAccount of the
// secondary's own, or the secondary's error.
func (r *Reconciler) copyFailed(proxy *corev1.Pod, sec clusters.Secondary, err error) (ctrl.Result, error) {
	var missing *copies.Missing
	var foreign *copies.ForeignServiceAccount
	switch {
	case errors.As(err, &missing):
		// Said once per missing object (not at each retry): the Event names it, as a kubelet's
		// FailedMount or CreateContainerConfigError does.
		msg := fmt.Sprintf("Waiting for %s %s: %s", missing.Kind, missing.Name, cmp.Or(missing.Why, "it does not exist in the primary"))
		if proxy.Status.Message != msg {
			r.event(proxy, corev1.EventTypeWarning, flotillav1.ReasonWaitingForDependencies, "Create", "%s", msg)
		}
		return r.pending(proxy, flotillav1.ReasonWaitingForDependencies, msg)
	case errors.As(err, &foreign):
		msg := fmt.Sprintf("In cluster %s, %s", sec.Name, foreign.Error())
		if proxy.Status.Reason != flotillav1.ReasonServiceAccountNotManaged {
			r.event(proxy, corev1.EventTypeWarning, flotillav1.ReasonServiceAccountNotManaged, "Create", "%s", msg)
		}
		return r.pending(proxy, flotillav1.ReasonServiceAccountNotManaged, msg)
	default:
		return r.pending(proxy, flotillav1.ReasonWaitingForDependencies, fmt.Sprintf("Copying dependencies to %s: %v", sec.Name, err))
	}
}

// alreadyThere handles a delegate's name taken in the secondary: by this primary's delegate not
// in the cache yet (it will show), or by anyone else's pod: never touched, and said.
func (r *Reconciler) alreadyThere(ctx context.Context, proxy *corev1.Pod, sec clusters.Secondary, delegate *corev1.Pod) (ctrl.Result, error) {
	var there corev1.Pod
	if err := sec.Client.Get(ctx, client.ObjectKeyFromObject(delegate), &there); err == nil &&
		there.Labels[flotillav1.LabelPrimary] != r.Secondaries.PrimaryID() {
		msg := fmt.Sprintf("Cluster %s already has a pod %s/%s that is not Flotilla's; it is left alone", sec.Name, there.Namespace, there.Name)
		countCreationError(sec.Name, apierrors.NewAlreadyExists(corev1.Resource("pods"), there.Name))
		if proxy.Status.Reason != flotillav1.ReasonNameConflict {
			r.event(proxy, corev1.EventTypeWarning, flotillav1.ReasonNameConflict, "Create", "%s", msg)
		}
		return r.pending(proxy, flotillav1.ReasonNameConflict, msg)
	}
	return ctrl.Result{RequeueAfter: transientRetry}, nil
}

// permanent says whether the secondary refused the delegate for good (invalid spec).
func permanent(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}

// ensureNamespace makes the delegate's namespace exist in the secondary with the managed-by label,
// and waits for its default ServiceAccount (a pod created before it is refused).
func (r *Reconciler) ensureNamespace(ctx context.Context, name string, labels map[string]string, sec clusters.Secondary) (reason, message string, err error) {
	// The labels it was ensured with are remembered too: a Pod Security level changed in the
	// primary is carried at the next reconcile of any proxy of the namespace (a change of it
	// brings them all back).
	key, want := sec.Name+"/"+name, canonicalLabels(labels)
	if had, ok := r.readyNamespaces.Load(key); ok && had == want {
		return "", "", nil
	}
	var notManaged *clusters.NamespaceNotManagedError
	if _, err := clusters.EnsureManagedNamespace(ctx, sec.Client, sec.Name, name, r.Secondaries.PrimaryID(), labels, nil); errors.As(err, &notManaged) {
		return flotillav1.ReasonNamespaceNotManaged, notManaged.Error(), nil
	} else if err != nil {
		return flotillav1.ReasonWaitingForDependencies, err.Error(), nil
	}
	var sa corev1.ServiceAccount
	if err := sec.Client.Get(ctx, client.ObjectKey{Namespace: name, Name: "default"}, &sa); err != nil {
		msg := fmt.Sprintf("Waiting for the default ServiceAccount of namespace %s in %s", name, sec.Name)
		if !apierrors.IsNotFound(err) {
			msg += ": " + err.Error()
		}
		return flotillav1.ReasonWaitingForDependencies, msg, nil
	}
	r.readyNamespaces.Store(key, want)
	return "", "", nil
}

// namespaceGone forgets that a namespace was made in a secondary when it is gone or going there
// (the namespace clean-up deleted it, empty, just before): the next pass makes it again, and the
// real claims a delegate waits for, which need it, follow.
func (r *Reconciler) namespaceGone(ctx context.Context, sec clusters.Secondary, name string) {
	var ns corev1.Namespace
	if err := sec.Client.Get(ctx, client.ObjectKey{Name: name}, &ns); apierrors.IsNotFound(err) || (err == nil && !ns.DeletionTimestamp.IsZero()) {
		r.forgetNamespace(sec.Name, name)
	}
}

// forgetNamespace forgets that a secondary's namespace was ensured: the next proxy of it ensures it
// again (the namespace cleanup deleted it there, say).
func (r *Reconciler) forgetNamespace(cluster, namespace string) {
	r.readyNamespaces.Delete(cluster + "/" + namespace)
}

// keepPodSecurity carries the primary namespace's Pod Security labels to the secondary's namespace
// of a running delegate when they changed (ensureNamespace is a map lookup when they did not).
func (r *Reconciler) keepPodSecurity(ctx context.Context, proxy *corev1.Pod, sec clusters.Secondary) error {
	var home corev1.Namespace
	if err := r.Client.Get(ctx, client.ObjectKey{Name: proxy.Namespace}, &home); err != nil {
		return client.IgnoreNotFound(err)
	}
	_, _, err := r.ensureNamespace(ctx, proxy.Namespace, translate.PodSecurityLabels(home.Labels), sec)
	return err
}

// canonicalLabels is labels as one sorted string.
func canonicalLabels(labels map[string]string) string {
	keys := slices.Sorted(maps.Keys(labels))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + labels[k] + ",")
	}
	return b.String()
}

// podSecurityChanged passes a namespace's update that changes its Pod Security labels.
var podSecurityChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !maps.Equal(translate.PodSecurityLabels(e.ObjectOld.GetLabels()), translate.PodSecurityLabels(e.ObjectNew.GetLabels()))
	},
}

// proxiesIn lists the proxies of a namespace of the primary.
func (r *Reconciler) proxiesIn(ctx context.Context, o client.Object) []reconcile.Request {
	return r.proxyRequests(ctx, "Listing the proxies of a namespace whose Pod Security level changed", o,
		client.InNamespace(o.GetName()), client.MatchingLabels{flotillav1.LabelProxy: "true"})
}

// proxyRequests are the reconcile requests of the proxies the cache lists with opts; an error is
// logged (what for, and of which object) and yields none.
func (r *Reconciler) proxyRequests(ctx context.Context, what string, of client.Object, opts ...client.ListOption) []reconcile.Request {
	var list corev1.PodList
	if err := r.Client.List(ctx, &list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, what, "name", of.GetName())
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// reconcileDelete deletes the delegate, then lets the proxy go: the finalizer is removed once no
// delegate of this proxy exists, and the proxy is deleted at once, as a kubelet does.
func (r *Reconciler) reconcileDelete(ctx context.Context, proxy *corev1.Pod, sec clusters.Secondary) (ctrl.Result, error) {
	delegate, synced, err := delegates.Get(sec, proxy.Namespace, proxy.Name)
	if err != nil || !synced {
		return ctrl.Result{RequeueAfter: transientRetry}, err
	}
	if delegate == nil || delegate.Annotations[flotillav1.AnnotationProxyUID] != string(proxy.UID) {
		if delegates.Deleted(sec, proxy.Namespace, proxy.Name, proxy.UID) {
			return ctrl.Result{}, r.letGo(ctx, proxy) // the watch saw it deleted
		}
		// The cache may not show a delegate created a moment ago: only a live read, or the
		// watch's deletion of it, proves it gone.
		var live corev1.Pod
		err := sec.Client.Get(ctx, client.ObjectKeyFromObject(proxy), &live)
		switch {
		case err != nil && !apierrors.IsNotFound(err):
			return ctrl.Result{RequeueAfter: transientRetry}, nil
		case err == nil && live.Annotations[flotillav1.AnnotationProxyUID] == string(proxy.UID):
			delegate = &live
		default:
			return ctrl.Result{}, r.letGo(ctx, proxy)
		}
	}
	now := r.now()
	if delegate.DeletionTimestamp.IsZero() || forceAgain(proxy, now) {
		grace := delegateGrace(proxy, now)
		if err := r.deleteDelegate(ctx, sec, delegate, &grace); err != nil {
			return ctrl.Result{}, err
		}
	}
	// The delegate watch's deletion brings the proxy back; the grace period's end too (forceAgain),
	// unless it is let go by then.
	r.recheckAfter(proxy, deleteRecheck(proxy, now))
	return ctrl.Result{}, nil
}

// deleteRecheck is when a proxy whose delegate is terminating is looked at again if no event of
// the delegate brings it back first: when its grace period ends (forceAgain may shorten the
// delegate's), but at least transientRetry and at most deleteRecheckCeiling later.
func deleteRecheck(proxy *corev1.Pod, now time.Time) time.Duration {
	return min(max(time.Duration(remainingGrace(proxy, now))*time.Second, transientRetry), deleteRecheckCeiling)
}

// reconcileUnbound handles a proxy no virtual node holds yet (waiting Pending for room, gated
// because no cluster can take it, or left to the primary's scheduler). Deleted, it goes at once: a
// delegate is only ever made for a bound proxy, so there is none to wait for (the API server would
// delete an unbound pod at once, but for the finalizer). Waiting, it says why, per cluster, as an
// Event (the scheduler's own FailedScheduling counts nodes only); the recorder folds repeats.
func (r *Reconciler) reconcileUnbound(ctx context.Context, proxy *corev1.Pod) (ctrl.Result, error) {
	if !proxy.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.letGo(ctx, proxy)
	}
	if gated(proxy) {
		return r.placeGated(ctx, proxy)
	}
	if why, ok := proxy.Annotations[flotillav1.AnnotationNoClusterFits]; ok && !scheduled(proxy) {
		r.event(proxy, corev1.EventTypeWarning, flotillav1.ReasonNoClusterFits, "Wait", "Waiting for room: %s", why)
	}
	return ctrl.Result{}, nil
}

// gated says whether the webhook held the proxy back because no cluster could take it.
func gated(proxy *corev1.Pod) bool {
	return slices.ContainsFunc(proxy.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
		return g.Name == flotillav1.SchedulingGatePlacement
	})
}

// placeGated looks again, for a proxy the webhook gated, for the clusters that fit it now
// (placement.Refit, the webhook's own judgement). None: the proxy stays Pending and unscheduled, says why (not
// "room": room is not what it lacks) and is looked at again with a backoff. Some: the proxy gets
// them as its node affinity, its seal anew and its gate removed, in one update (Kubernetes lets a
// gated pod's node affinity be set), and the primary's scheduler binds it among them. Only a
// proxy whose seal verifies is touched: the reconciler never seals what the webhook did not make.
func (r *Reconciler) placeGated(ctx context.Context, proxy *corev1.Pod) (ctrl.Result, error) {
	if r.Views == nil || seal.Verify(r.SealKey, proxy) != nil {
		return ctrl.Result{}, nil
	}
	clusters, err := r.Views.ForNamespace(ctx, proxy.Namespace)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("gathering the clusters for gated proxy %s/%s: %w", proxy.Namespace, proxy.Name, err)
	}
	if gang, ok, err := placement.GangOf(proxy); err == nil && ok {
		return r.placeGang(ctx, proxy, gang, clusters)
	}
	return r.placeOne(ctx, proxy, clusters)
}

// placeOne lets a gated proxy of no gang go to the clusters that fit it now, or says why none does.
// While another scheduling gate holds it (Kueue's admission), it is left alone: what lets it go may
// also say where (a flavor's node labels), and the gate's removal brings it back.
func (r *Reconciler) placeOne(ctx context.Context, proxy *corev1.Pod, clusters []placement.ClusterView) (ctrl.Result, error) {
	if heldByOthers(proxy) {
		return ctrl.Result{}, nil
	}
	feasible, why, err := placement.Refit(ctx, proxy, clusters)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("placing gated proxy %s/%s: %w", proxy.Namespace, proxy.Name, err)
	}
	if len(feasible) == 0 {
		r.event(proxy, corev1.EventTypeWarning, flotillav1.ReasonNoClusterFits, "Wait", "No cluster can run it as it is: %s", why)
		return ctrl.Result{RequeueAfter: pendingRetry(proxy, r.now())}, r.sayUnschedulable(ctx, proxy, why)
	}
	if released, err := r.release(ctx, proxy, feasible, ""); err != nil || !released {
		return ctrl.Result{}, err
	}
	r.event(proxy, corev1.EventTypeNormal, flotillav1.ReasonPlaced, "Place", "Cluster(s) %s can run it now", strings.Join(feasible, ", "))
	return ctrl.Result{}, nil
}

// sayUnschedulable writes why no cluster fits a gated proxy into its PodScheduled condition
// (Unschedulable, as the scheduler says of a pod no node fits), when it says something else.
func (r *Reconciler) sayUnschedulable(ctx context.Context, proxy *corev1.Pod, why string) error {
	msg := "No cluster can run it as it is: " + why
	for _, c := range proxy.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && c.Message == msg {
			return nil
		}
	}
	base := proxy.DeepCopy()
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: msg, LastTransitionTime: metav1.NewTime(r.now())}
	replaced := false
	for i := range proxy.Status.Conditions {
		if proxy.Status.Conditions[i].Type == corev1.PodScheduled {
			proxy.Status.Conditions[i], replaced = cond, true
		}
	}
	if !replaced {
		proxy.Status.Conditions = append(proxy.Status.Conditions, cond)
	}
	return client.IgnoreNotFound(r.Client.Status().Patch(ctx, proxy, client.MergeFrom(base)))
}

// scheduled says whether the primary's scheduler has bound the pod (its binding may not have
// reached the cache yet).
func scheduled(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// forget drops what is kept of a proxy that is gone from the cache.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.own.forget(key)
	r.starts.forget(key)
}

// letGo removes the finalizer and deletes the proxy at once, as a kubelet does.
func (r *Reconciler) letGo(ctx context.Context, proxy *corev1.Pod) (err error) {
	cluster, _ := flotillav1.ClusterOfNode(proxy.Spec.NodeName)
	ctx, span := r.trace(ctx, spanRelease, proxy, cluster)
	defer func() { tracing.End(span, err) }()
	r.events.forget(proxy.UID)
	r.allocations.Delete(proxy.UID)
	r.starts.forget(client.ObjectKeyFromObject(proxy))
	// Recorded before the calls: their watch events may come before they return.
	r.own.deleted(proxy)
	if i := slices.Index(proxy.Finalizers, flotillav1.FinalizerDelegate); i >= 0 {
		if err := client.IgnoreNotFound(r.Client.Patch(ctx, proxy, removeFinalizer(i))); err != nil {
			r.own.forget(client.ObjectKeyFromObject(proxy))
			return err
		}
	}
	zero := int64(0)
	err = client.IgnoreNotFound(r.Client.Delete(ctx, proxy, &client.DeleteOptions{GracePeriodSeconds: &zero,
		Preconditions: &metav1.Preconditions{UID: &proxy.UID}}))
	if err != nil {
		r.own.forget(client.ObjectKeyFromObject(proxy))
	}
	return err
}

// removeFinalizer is a JSON patch that removes Flotilla's finalizer at index i of a proxy's list,
// and only it: the test fails the patch (Invalid) if the list changed there meanwhile, and no
// other change made meanwhile conflicts with it, as one under an optimistic lock on the whole
// object would (a conflict costs a reconcile and a live read of the secondary).
func removeFinalizer(i int) client.Patch {
	path := fmt.Sprintf("/metadata/finalizers/%d", i)
	raw, _ := json.Marshal([]map[string]string{
		{"op": "test", "path": path, "value": flotillav1.FinalizerDelegate},
		{"op": "remove", "path": path},
	})
	return client.RawPatch(types.JSONPatchType, raw)
}

// remainingGrace is what is left of the proxy's own grace period: a proxy evicted while its
// secondary was unreachable has none left, so its stale delegate goes at once when it returns.
func remainingGrace(proxy *corev1.Pod, now time.Time) int64 {
	if proxy.DeletionTimestamp == nil {
		if proxy.DeletionGracePeriodSeconds != nil {
			return *proxy.DeletionGracePeriodSeconds
		}
		return corev1.DefaultTerminationGracePeriodSeconds
	}
	left := int64(proxy.DeletionTimestamp.Sub(now).Seconds())
	if left < 0 {
		return 0
	}
	return left
}

func (r *Reconciler) deleteDelegate(ctx context.Context, sec clusters.Secondary, delegate *corev1.Pod, grace *int64) error {
	ctx, span := r.trace(ctx, spanDelete, delegate, sec.Name)
	opts := &client.DeleteOptions{GracePeriodSeconds: grace, Preconditions: &metav1.Preconditions{UID: &delegate.UID}}
	err := sec.Client.Delete(ctx, delegate, opts)
	tracing.End(span, err)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting delegate %s/%s in %s: %w", delegate.Namespace, delegate.Name, sec.Name, err)
	}
	return nil
}

// delegateLost handles a delegate that existed and is gone while its proxy lives: a proxy with a
// controller that re-creates pods (ReplicaSet, StatefulSet) is deleted so it is re-elected; a bare
// or Job pod is set Failed with reason DelegateLost.
func (r *Reconciler) delegateLost(ctx context.Context, proxy *corev1.Pod, cluster string) (ctrl.Result, error) {
	if ref := metav1.GetControllerOf(proxy); ref != nil && (ref.Kind == "ReplicaSet" || ref.Kind == "StatefulSet") {
		r.event(proxy, corev1.EventTypeWarning, flotillav1.ReasonDelegateLost, "Delete",
			"The delegate in cluster %s is gone; the proxy is deleted so that its %s re-creates it", cluster, ref.Kind)
		err := r.Client.Delete(ctx, proxy, &client.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &proxy.UID}})
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.event(proxy, corev1.EventTypeWarning, flotillav1.ReasonDelegateLost, "Fail", "The delegate in cluster %s is gone; the pod has failed", cluster)
	return r.fail(proxy, flotillav1.ReasonDelegateLost, fmt.Sprintf("The delegate in cluster %s is gone", cluster))
}

func (r *Reconciler) event(proxy *corev1.Pod, kind, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(proxy, nil, kind, reason, action, format, args...)
	}
}

// budget takes one of the secondary's PerCluster slots, without waiting; release gives it back.
func (r *Reconciler) budget(cluster string) (release func(), ok bool) {
	n := r.PerCluster
	if n <= 0 {
		n = 16
	}
	v, _ := r.budgets.LoadOrStore(cluster, make(chan struct{}, n))
	slots, _ := v.(chan struct{})
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, true
	default:
		return nil, false
	}
}
