package volume

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/flotilla-dev/flotilla/internal/eventwriter"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/clusters/views"
	"github.com/flotilla-dev/flotilla/pkg/seal"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// Secondaries is what the reconciler needs of the cluster registry.
type Secondaries interface {
	Secondary(name string) (clusters.Secondary, bool)
	Snapshot(name string) (clusters.Snapshot, bool)
	PrimaryID() string
	Source(w clusters.Watch, h handler.EventHandler) source.Source
}

// Watch follows this primary's real claims in every secondary.
var Watch = clusters.Watch{Name: "claims", Object: &corev1.PersistentVolumeClaim{},
	Selector: func(primaryID string) string { return flotillav1.LabelPrimary + "=" + primaryID }}

// Reconciler keeps each primary claim of class flotilla and its real claim together.
type Reconciler struct {
	// Client reads claims (the manager's cache) and proxies, and writes claims and volumes.
	Client      client.Client
	Secondaries Secondaries
	Recorder    events.EventRecorder
	// SealKey verifies that a proxy which would take a claim to a fresh cluster was made by the
	// webhook (flotilla.dev/seal).
	SealKey seal.Key
	// Views gathers the clusters as placement sees them: whether the cluster holding a claim's
	// data is lost (failover-tainted or draining). Nil: never.
	Views *views.Gatherer
	// forwarded remembers, per primary claim UID, the count of each of the real claim's Warning
	// Events already shown (by Event UID): while it is unbound or resizing, and after, once one
	// was shown, until the claim is released.
	forwarded sync.Map
}

// waitFor is how long a claim waits for what is not there yet (its namespace, its cluster).
const waitFor = 5 * time.Second

// Reconcile gathers the claim, its cluster and its real claim, and acts on them.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pvc corev1.PersistentVolumeClaim
	if err := r.Client.Get(ctx, req.NamespacedName, &pvc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !translate.RemoteClaim(&pvc) {
		return ctrl.Result{}, nil
	}
	if !pvc.DeletionTimestamp.IsZero() {
		return r.release(ctx, &pvc)
	}
	var proxies corev1.PodList
	if err := r.Client.List(ctx, &proxies, client.InNamespace(pvc.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the proxies of %s: %w", pvc.Namespace, err)
	}
	if from := pvc.Annotations[flotillav1.AnnotationVolumeCluster]; from != "" {
		lost, err := r.lost(ctx, from)
		if err != nil {
			return ctrl.Result{}, err
		}
		if to, pod := moveTo(&pvc, proxies.Items, lost, r.sealed); to != "" {
			return ctrl.Result{RequeueAfter: time.Millisecond}, r.move(ctx, &pvc, pod, from, to)
		}
	}
	cluster := clusterOf(&pvc, proxies.Items)
	if cluster == "" {
		return ctrl.Result{}, nil // no pod of it is placed yet
	}
	if pvc.Annotations[flotillav1.AnnotationVolumeCluster] != cluster || !controllerutil.ContainsFinalizer(&pvc, flotillav1.FinalizerVolume) {
		patch := client.MergeFrom(pvc.DeepCopy())
		metav1.SetMetaDataAnnotation(&pvc.ObjectMeta, flotillav1.AnnotationVolumeCluster, cluster)
		controllerutil.AddFinalizer(&pvc, flotillav1.FinalizerVolume)
		if err := r.Client.Patch(ctx, &pvc, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("holding claim %s for cluster %s: %w", pvc.Name, cluster, err)
		}
	}
	sec, ok := r.Secondaries.Secondary(cluster)
	switch {
	case !ok:
		// Not registered (removed, or not yet back): looked at again now and then.
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	case !sec.Running:
		return ctrl.Result{RequeueAfter: waitFor}, nil
	}
	real, err := r.ensureRealClaim(ctx, sec, &pvc)
	if err != nil || real == nil {
		return ctrl.Result{RequeueAfter: waitFor}, err
	}
	if err := r.ensureStandIn(ctx, &pvc, real, cluster); err != nil {
		return ctrl.Result{}, err
	}
	return r.showRealClaim(ctx, sec, &pvc, real)
}

// showRealClaim shows on the primary claim what its real claim says: while it is not bound, its
// provisioning problems; once bound, its conditions and, while it is being expanded, its resizer's
// failures. Those are Events there, which change nothing on the claim: looked for every
// eventsEvery while they may come.
func (r *Reconciler) showRealClaim(ctx context.Context, sec clusters.Secondary, pvc, real *corev1.PersistentVolumeClaim) (ctrl.Result, error) {
	if real.Status.Phase != corev1.ClaimBound {
		r.forwardEvents(ctx, sec, pvc, real, "Provision")
		return ctrl.Result{RequeueAfter: eventsEvery}, nil
	}
	if err := r.mirrorConditions(ctx, pvc, real, sec.Name); err != nil {
		return ctrl.Result{}, err
	}
	if resizing(real) {
		r.forwardEvents(ctx, sec, pvc, real, "Resize")
		return ctrl.Result{RequeueAfter: eventsEvery}, nil
	}
	// Kept only while it remembers an Event shown, so that a later expansion does not show it again.
	if v, ok := r.forwarded.Load(pvc.UID); ok && len(v.(map[types.UID]int32)) == 0 {
		r.forwarded.Delete(pvc.UID)
	}
	return ctrl.Result{}, nil
}

// mirrorConditions shows the real claim's conditions on the primary claim (resizeConditions).
func (r *Reconciler) mirrorConditions(ctx context.Context, pvc, real *corev1.PersistentVolumeClaim, cluster string) error {
	want := resizeConditions(real, cluster)
	if equality.Semantic.DeepEqual(pvc.Status.Conditions, want) {
		return nil
	}
	patch := client.MergeFrom(pvc.DeepCopy())
	pvc.Status.Conditions = want
	if err := r.Client.Status().Patch(ctx, pvc, patch); err != nil {
		return fmt.Errorf("showing the conditions of the claim in %s on claim %s: %w", cluster, pvc.Name, err)
	}
	return nil
}

// lost says whether a cluster's virtual node carries the failover taint, or is being drained
// (flotilla.dev/draining): a pod that chose recreate may then start afresh elsewhere.
func (r *Reconciler) lost(ctx context.Context, cluster string) (bool, error) {
	if r.Views == nil {
		return false, nil
	}
	v, ok, err := r.Views.View(ctx, cluster)
	if err != nil {
		return false, fmt.Errorf("gathering cluster %s: %w", cluster, err)
	}
	return ok && (v.Draining || v.FailoverTainted), nil
}

func (r *Reconciler) sealed(p *corev1.Pod) bool { return seal.Verify(r.SealKey, p) == nil }

// move points a claim at a fresh real claim in cluster to, for a pod that chose to start afresh
// there (moveTo), and keeps the real claim in from: it is deleted with the primary claim, never
// before. The claim and the pod say so in a Warning Event.
func (r *Reconciler) move(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pod *corev1.Pod, from, to string) error {
	patch := client.MergeFromWithOptions(pvc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	metav1.SetMetaDataAnnotation(&pvc.ObjectMeta, flotillav1.AnnotationVolumeCluster, to)
	metav1.SetMetaDataAnnotation(&pvc.ObjectMeta, flotillav1.AnnotationVolumeRetainedIn, withRetained(pvc, from, to))
	if err := r.Client.Patch(ctx, pvc, patch); err != nil {
		return fmt.Errorf("moving claim %s from %s to %s: %w", pvc.Name, from, to, err)
	}
	msg := fmt.Sprintf("Cluster %s, which holds the data of claim %s, is unreachable; pod %s chose %s: %s, so it starts on a claim in cluster %s "+
		"(empty unless that cluster kept one of it); the claim in %s is kept until claim %s is deleted",
		from, pvc.Name, pod.Name, flotillav1.AnnotationOnVolumeClusterLoss, flotillav1.OnVolumeClusterLossRecreate, to, from, pvc.Name)
	if r.Recorder != nil {
		r.Recorder.Eventf(pvc, pod, corev1.EventTypeWarning, flotillav1.ReasonVolumeClusterLost, "Recreate", "%s", msg)
		r.Recorder.Eventf(pod, pvc, corev1.EventTypeWarning, flotillav1.ReasonVolumeClusterLost, "Recreate", "%s", msg)
	}
	return nil
}

// eventsEvery is how often an unbound real claim's Events are looked at.
const eventsEvery = 10 * time.Second

// forwardEvents shows the real claim's Warning Events (ProvisioningFailed, VolumeResizeFailed,
// with the secondary's message) on the primary claim, each once per count it reached.
func (r *Reconciler) forwardEvents(ctx context.Context, sec clusters.Secondary, pvc, real *corev1.PersistentVolumeClaim, action string) {
	if r.Recorder == nil || real.UID == "" {
		return
	}
	evs, err := sec.EventsOf(ctx, real.Namespace, real.UID)
	if err != nil {
		return // best effort: looked at again at the next pass
	}
	v, _ := r.forwarded.LoadOrStore(pvc.UID, map[types.UID]int32{})
	seen := v.(map[types.UID]int32) // one claim is reconciled by one worker at a time
	for _, e := range evs {
		count := max(e.Count, 1)
		if e.Type != corev1.EventTypeWarning || seen[e.UID] >= count {
			continue
		}
		seen[e.UID] = count
		eventwriter.Forward(r.Recorder, pvc, sec.Name, action, &e)
	}
}

// errConflict is a claim of that name in the secondary that is not this claim's.
var errConflict = errors.New("not Flotilla's")

// ensureRealClaim makes the real claim, or asks it for the primary claim's size (expansion), and returns it (nil while it waits: for its
// namespace, or for a previous one of that name to go).
func (r *Reconciler) ensureRealClaim(ctx context.Context, sec clusters.Secondary, pvc *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	id := r.Secondaries.PrimaryID()
	var real corev1.PersistentVolumeClaim
	err := sec.Client.Get(ctx, client.ObjectKeyFromObject(pvc), &real)
	switch {
	case apierrors.IsNotFound(err):
		// The proxy reconciler makes the namespace, with the labels it must have, before the
		// delegate: the claim follows it there.
		if err := sec.Client.Get(ctx, client.ObjectKey{Name: pvc.Namespace}, &corev1.Namespace{}); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		want := realClaim(pvc, id, r.storageClass(sec.Name))
		if err := sec.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			r.event(pvc, corev1.EventTypeWarning, "RealClaimFailed", "Create", "Cluster %s refused the claim: %v", sec.Name, err)
			return nil, fmt.Errorf("creating the claim %s in %s: %w", pvc.Name, sec.Name, err)
		}
		r.event(pvc, corev1.EventTypeNormal, "RealClaimCreated", "Create", "Claim created in cluster %s", sec.Name)
		return want, nil
	case err != nil:
		return nil, fmt.Errorf("reading the claim %s in %s: %w", pvc.Name, sec.Name, err)
	case !translate.RealClaimOf(&real, pvc, id):
		if real.Labels[flotillav1.LabelPrimary] == id && !real.DeletionTimestamp.IsZero() {
			return nil, nil // an earlier claim of that name, on its way out
		}
		r.event(pvc, corev1.EventTypeWarning, flotillav1.ReasonNameConflict, "Create", "Cluster %s has a claim %s that is %s; it is left alone", sec.Name, pvc.Name, errConflict)
		return nil, nil
	}
	if size := expansion(pvc, &real); size != nil {
		patch := client.MergeFrom(real.DeepCopy())
		real.Spec.Resources.Requests[corev1.ResourceStorage] = *size
		if err := sec.Client.Patch(ctx, &real, patch); err != nil {
			r.event(pvc, corev1.EventTypeWarning, "ExpansionFailed", "Update", "Cluster %s refused to expand the claim to %s: %v", sec.Name, size, err)
			return &real, nil
		}
		r.event(pvc, corev1.EventTypeNormal, "Expanding", "Update", "Claim in cluster %s asked for %s", sec.Name, size)
	}
	return &real, nil
}

// ensureStandIn makes the primary's volume for the claim, and keeps its size and the real
// volume's name, and the claim's size, true to the real one.
func (r *Reconciler) ensureStandIn(ctx context.Context, pvc, real *corev1.PersistentVolumeClaim, cluster string) error {
	want := standIn(pvc, real, cluster)
	var pv corev1.PersistentVolume
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), &pv)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating volume %s: %w", want.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading volume %s: %w", want.Name, err)
	}
	if !equality.Semantic.DeepEqual(pv.Spec.Capacity, want.Spec.Capacity) || pv.Annotations[flotillav1.AnnotationRealVolume] != want.Annotations[flotillav1.AnnotationRealVolume] ||
		pv.Annotations[flotillav1.AnnotationVolumeCluster] != cluster || pv.Labels[flotillav1.LabelCluster] != cluster {
		patch := client.MergeFrom(pv.DeepCopy())
		pv.Spec.Capacity = want.Spec.Capacity
		metav1.SetMetaDataAnnotation(&pv.ObjectMeta, flotillav1.AnnotationRealVolume, want.Annotations[flotillav1.AnnotationRealVolume])
		metav1.SetMetaDataAnnotation(&pv.ObjectMeta, flotillav1.AnnotationVolumeCluster, cluster)
		metav1.SetMetaDataLabel(&pv.ObjectMeta, flotillav1.LabelCluster, cluster)
		if err := r.Client.Patch(ctx, &pv, patch); err != nil {
			return fmt.Errorf("updating volume %s: %w", pv.Name, err)
		}
	}
	// The claim shows the size its cluster gave (its binding copied the volume's size then).
	size := want.Spec.Capacity[corev1.ResourceStorage]
	if have, ok := pvc.Status.Capacity[corev1.ResourceStorage]; pvc.Status.Phase == corev1.ClaimBound && (!ok || have.Cmp(size) != 0) {
		patch := client.MergeFrom(pvc.DeepCopy())
		pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
		if err := r.Client.Status().Patch(ctx, pvc, patch); err != nil {
			return fmt.Errorf("updating the size of claim %s: %w", pvc.Name, err)
		}
	}
	return nil
}

// release deletes the real claims of a deleted primary claim (in its cluster and in those that
// kept an earlier one) and waits until they are gone, then its stand-in volume, then lets the
// claim go. A cluster no longer registered keeps what it holds (removed with --orphan); one
// registered but away is waited for.
func (r *Reconciler) release(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(pvc, flotillav1.FinalizerVolume) {
		return ctrl.Result{}, nil
	}
	var wait time.Duration
	for _, cluster := range append(retainedIn(pvc), pvc.Annotations[flotillav1.AnnotationVolumeCluster]) {
		if cluster == "" {
			continue
		}
		w, err := r.releaseIn(ctx, pvc, cluster)
		if err != nil {
			return ctrl.Result{}, err
		}
		if w > 0 && (wait == 0 || w < wait) {
			wait = w
		}
	}
	if wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: standInName(pvc)}}
	if err := r.Client.Delete(ctx, pv); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("deleting volume %s: %w", pv.Name, err)
	}
	r.forwarded.Delete(pvc.UID)
	patch := client.MergeFrom(pvc.DeepCopy())
	controllerutil.RemoveFinalizer(pvc, flotillav1.FinalizerVolume)
	return ctrl.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, pvc, patch))
}

// releaseIn deletes a claim's real claim in one cluster, and says how long to wait before looking
// again (0: it is gone, or the cluster is no longer registered).
func (r *Reconciler) releaseIn(ctx context.Context, pvc *corev1.PersistentVolumeClaim, cluster string) (time.Duration, error) {
	sec, ok := r.Secondaries.Secondary(cluster)
	if !ok {
		return 0, nil
	}
	if !sec.Running {
		return waitFor, nil
	}
	var real corev1.PersistentVolumeClaim
	err := sec.Client.Get(ctx, client.ObjectKeyFromObject(pvc), &real)
	switch {
	case apierrors.IsNotFound(err):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("reading the claim %s in %s: %w", pvc.Name, cluster, err)
	case !translate.RealClaimOf(&real, pvc, r.Secondaries.PrimaryID()):
		return 0, nil // another claim of that name: not ours to delete
	}
	if real.DeletionTimestamp.IsZero() {
		uid := real.UID
		if err := sec.Client.Delete(ctx, &real, &client.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); client.IgnoreNotFound(err) != nil {
			return 0, fmt.Errorf("deleting the claim %s in %s: %w", pvc.Name, cluster, err)
		}
		r.event(pvc, corev1.EventTypeNormal, "RealClaimDeleted", "Delete", "Claim deleted in cluster %s", cluster)
	}
	return time.Second, nil // until it is gone
}

// storageClass is the class a cluster's registration gives real claims ("" for its default).
func (r *Reconciler) storageClass(cluster string) string {
	if s, ok := r.Secondaries.Snapshot(cluster); ok && s.StorageClass != clusters.StorageClassNone {
		return s.StorageClass
	}
	return ""
}

func (r *Reconciler) event(pvc *corev1.PersistentVolumeClaim, kind, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(pvc, nil, kind, reason, action, format, args...)
	}
}
