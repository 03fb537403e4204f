package allowance

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/flotilla-dev/flotilla/internal/clocks"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// wantedFor is how long a namespace counts as wanting room after the primary last said so.
const wantedFor = 2 * time.Minute

// Reconciler holds one primary to its PrimaryAllowance in this cluster.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Clock dates the namespaces' wants (nil: the real clock).
	Clock clock.PassiveClock
}

// Reconcile gathers the primary's namespaces and their quotas, writes the split, labels the
// namespaces whose quota is in force, and patches the status once at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	a := &flotillav1.PrimaryAllowance{}
	if err := r.Client.Get(ctx, req.NamespacedName, a); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !a.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.release(ctx, a)
	}
	if controllerutil.AddFinalizer(a, flotillav1.AllowanceFinalizer) {
		if err := r.Client.Update(ctx, a); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer of PrimaryAllowance %s: %w", a.Name, err)
		}
	}
	base := a.DeepCopy()
	defer func() {
		if apiequality.Semantic.DeepEqual(base.Status, a.Status) {
			return
		}
		if err := r.Client.Status().Patch(ctx, a, client.MergeFrom(base)); err != nil && retErr == nil {
			retErr = client.IgnoreNotFound(fmt.Errorf("patching the status of PrimaryAllowance %s: %w", a.Name, err))
		}
	}()
	namespaces, quotas, err := r.gather(ctx, a.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	hard := QuotaHard(a.Spec.Hard)
	parts := make([]Part, len(namespaces))
	now := clocks.Now(r.Clock)
	var recheck time.Duration
	for i, ns := range namespaces {
		parts[i] = Part{Namespace: ns.Name}
		if until, ok := wantedUntil(&ns, now); ok {
			parts[i].Wanting = true
			if recheck == 0 || until.Sub(now) < recheck {
				recheck = until.Sub(now) // shared again once the want lapses
			}
		}
		if q := quotas[ns.Name]; q != nil {
			parts[i].Spec, parts[i].Counted, parts[i].Used = q.Spec.Hard, q.Status.Hard, q.Status.Used
		}
	}
	split := Split(hard, parts)
	var pending []string
	for i := range namespaces {
		inForce, err := r.apply(ctx, a.Name, &namespaces[i], quotas[namespaces[i].Name], split[i])
		if err != nil {
			return ctrl.Result{}, err
		}
		if !inForce {
			pending = append(pending, namespaces[i].Name)
		}
	}
	r.setStatus(a, hard, parts, split, pending)
	return ctrl.Result{RequeueAfter: recheck}, nil
}

// wantedUntil is when a namespace's want of room lapses, if it still holds at now.
func wantedUntil(ns *corev1.Namespace, now time.Time) (time.Time, bool) {
	at, err := time.Parse(time.RFC3339, ns.Annotations[flotillav1.AnnotationAllowanceWanted])
	if err != nil {
		return time.Time{}, false
	}
	// A date ahead of this clock counts from now: the primary's clock is not this one's.
	if at.After(now) {
		at = now
	}
	until := at.Add(wantedFor)
	return until, until.After(now)
}

// gather lists the namespaces the primary manages here (by their managed-by label), in name
// order, and the lender's quota in each.
func (r *Reconciler) gather(ctx context.Context, primaryID string) ([]corev1.Namespace, map[string]*corev1.ResourceQuota, error) {
	var nsList corev1.NamespaceList
	if err := r.Client.List(ctx, &nsList, client.MatchingLabels{flotillav1.LabelManagedBy: primaryID}); err != nil {
		return nil, nil, fmt.Errorf("listing the namespaces of primary %s: %w", primaryID, err)
	}
	namespaces := nsList.Items[:0]
	for _, ns := range nsList.Items {
		if ns.DeletionTimestamp.IsZero() {
			namespaces = append(namespaces, ns)
		}
	}
	sort.Slice(namespaces, func(i, j int) bool { return namespaces[i].Name < namespaces[j].Name })
	var qList corev1.ResourceQuotaList
	if err := r.Client.List(ctx, &qList, client.MatchingLabels{flotillav1.LabelAllowance: primaryID}); err != nil {
		return nil, nil, fmt.Errorf("listing the quotas of primary %s: %w", primaryID, err)
	}
	quotas := map[string]*corev1.ResourceQuota{}
	for i := range qList.Items {
		if q := &qList.Items[i]; q.Name == flotillav1.AllowanceQuotaName {
			quotas[q.Namespace] = q
		}
	}
	return namespaces, quotas, nil
}

// apply writes a namespace's quota (created, or its spec.hard updated under optimistic lock) and,
// once the API server counts it, the namespace's allowance label. It says whether the quota is in
// force: its counted limits are its spec's.
func (r *Reconciler) apply(ctx context.Context, primaryID string, ns *corev1.Namespace, q *corev1.ResourceQuota, hard corev1.ResourceList) (bool, error) {
	switch {
	case q == nil:
		q = &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: flotillav1.AllowanceQuotaName, Namespace: ns.Name,
			Labels: map[string]string{flotillav1.LabelAllowance: primaryID, "app.kubernetes.io/part-of": "flotilla"}},
			Spec: corev1.ResourceQuotaSpec{Hard: hard}}
		if err := r.Client.Create(ctx, q); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("creating the quota of namespace %s: %w", ns.Name, err)
		}
		return false, nil
	case !sameList(q.Spec.Hard, hard):
		base := q.DeepCopy()
		q.Spec.Hard = hard
		if err := r.Client.Patch(ctx, q, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return false, fmt.Errorf("setting the quota of namespace %s: %w", ns.Name, err)
		}
		return false, nil
	case !sameList(q.Status.Hard, q.Spec.Hard):
		return false, nil // the quota controller has not counted it yet: its update wakes us
	}
	if ns.Labels[flotillav1.LabelAllowance] == primaryID {
		return true, nil
	}
	base := ns.DeepCopy()
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[flotillav1.LabelAllowance] = primaryID
	if err := r.Client.Patch(ctx, ns, client.MergeFrom(base)); err != nil {
		return false, fmt.Errorf("labelling namespace %s as held to the allowance: %w", ns.Name, err)
	}
	r.Recorder.Eventf(ns, nil, corev1.EventTypeNormal, flotillav1.ReasonQuotasInForce, "Lend",
		"Quota %s holds primary %s's pods here to their part of its allowance", flotillav1.AllowanceQuotaName, primaryID)
	return true, nil
}

// release, once the allowance is deleted, removes its quotas and the namespaces' labels, then
// its finalizer: the primary is no longer limited here.
func (r *Reconciler) release(ctx context.Context, a *flotillav1.PrimaryAllowance) error {
	namespaces, quotas, err := r.gather(ctx, a.Name)
	if err != nil {
		return err
	}
	for _, q := range quotas {
		if err := r.Client.Delete(ctx, q, client.Preconditions{UID: &q.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the quota of namespace %s: %w", q.Namespace, err)
		}
	}
	for i := range namespaces {
		ns := &namespaces[i]
		if _, ok := ns.Labels[flotillav1.LabelAllowance]; !ok {
			continue
		}
		base := ns.DeepCopy()
		delete(ns.Labels, flotillav1.LabelAllowance)
		if err := r.Client.Patch(ctx, ns, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("unlabelling namespace %s: %w", ns.Name, err)
		}
	}
	if controllerutil.RemoveFinalizer(a, flotillav1.AllowanceFinalizer) {
		if err := r.Client.Update(ctx, a); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("removing the finalizer of PrimaryAllowance %s: %w", a.Name, err)
		}
	}
	return nil
}

// setStatus is the allowance's usage, each namespace's part, the summary and Enforced.
func (r *Reconciler) setStatus(a *flotillav1.PrimaryAllowance, hard corev1.ResourceList, parts []Part, split []corev1.ResourceList, pending []string) {
	used := corev1.ResourceList{}
	a.Status.Namespaces = nil
	for i, p := range parts {
		a.Status.Namespaces = append(a.Status.Namespaces, flotillav1.NamespaceAllowance{Name: p.Namespace, Hard: split[i], Used: p.Used})
		for name := range hard {
			sum := used[name]
			sum.Add(p.Used[name])
			used[name] = sum
		}
	}
	a.Status.Used = used
	var summary []string
	var over []string
	for _, name := range slices.Sorted(maps.Keys(hard)) {
		u, h := used[name], hard[name]
		summary = append(summary, fmt.Sprintf("%s %s/%s", name, u.String(), h.String()))
		if u.Cmp(h) > 0 {
			over = append(over, fmt.Sprintf("%s %s of %s", name, u.String(), h.String()))
		}
	}
	a.Status.Summary = strings.Join(summary, ", ")
	a.Status.ObservedGeneration = a.Generation
	cond := metav1.Condition{Type: flotillav1.ConditionEnforced, Status: metav1.ConditionTrue, Reason: flotillav1.ReasonQuotasInForce,
		ObservedGeneration: a.Generation, Message: fmt.Sprintf("%d namespace(s) held to their part by quota %s", len(parts), flotillav1.AllowanceQuotaName)}
	switch {
	case len(over) > 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, flotillav1.ReasonOverAllowance
		cond.Message = "The primary uses more than allowed (" + strings.Join(over, ", ") + "): nothing is evicted, nothing more admitted until it is under"
		if c := meta.FindStatusCondition(a.Status.Conditions, flotillav1.ConditionEnforced); c == nil || c.Reason != flotillav1.ReasonOverAllowance {
			r.Recorder.Eventf(a, nil, corev1.EventTypeWarning, flotillav1.ReasonOverAllowance, "Lend", "%s", cond.Message)
		}
	case len(pending) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, flotillav1.ReasonQuotasPending
		cond.Message = "Quota not yet written or counted in: " + strings.Join(pending, ", ")
	}
	meta.SetStatusCondition(&a.Status.Conditions, cond)
}

// sameList compares two lists by value (1000m equals 1).
func sameList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		o, ok := b[name]
		if !ok || q.Cmp(o) != 0 {
			return false
		}
	}
	return true
}
