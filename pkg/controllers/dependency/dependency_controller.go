package dependency

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/internal/clocks"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/copies"
	"github.com/flotilla-dev/flotilla/pkg/logging"
	"github.com/flotilla-dev/flotilla/pkg/ssa"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// Key names one copy: an object of the primary in one secondary.
type Key struct{ Cluster, Kind, Namespace, Name string }

func (k Key) String() string {
	return fmt.Sprintf("%s %s/%s in %s", k.Kind, k.Namespace, k.Name, k.Cluster)
}

// Secondaries is what the sync needs of the cluster registry.
type Secondaries interface {
	Secondary(name string) (clusters.Secondary, bool)
	PrimaryID() string
}

// Versions gives the primary's current resourceVersion of a ConfigMap or Secret (from a
// metadata-only cache: their content is read only when it changed).
type Versions interface {
	Version(kind, namespace, name string) (resourceVersion string, exists bool)
}

// Reconciler keeps the copies in each secondary true to the primary after the delegates that
// use them were created, and removes a copy once no delegate in that secondary has used it for
// Grace. Its key is one copy; "in use" is counted from the proxies bound to the secondary's
// virtual node, so a manager restart recounts from the source of truth.
type Reconciler struct {
	// Cache reads proxies, Services and NetworkPolicies of the primary.
	Cache client.Reader
	// Primary reads ConfigMaps and Secrets of the primary (uncached: Secrets are never cached).
	Primary     client.Reader
	Versions    Versions
	Secondaries Secondaries
	// Grace is how long an unused copy stays (a delegate re-created meanwhile finds it).
	Grace time.Duration
	// Clock measures Grace (default: the real one).
	Clock clock.PassiveClock
	// Metadata watches the primary's ConfigMaps and Secrets: SetupWithManager adds it to the
	// manager and reads Versions from it.
	Metadata *MetadataWatch

	mu      sync.Mutex
	applied map[Key]string // the primary's resourceVersion last copied
	// written is the resourceVersion of each copy as reflection last wrote it. A Secret of a
	// secondary is never read: it is deleted only on this precondition, so a copy anyone changed
	// since (a Replicator took it, a user edited it) is left in place.
	written     map[Key]string
	unusedSince map[Key]time.Time
}

const unavailableRetry = 10 * time.Second

// Reconcile copies or removes one object in one secondary.
func (r *Reconciler) Reconcile(ctx context.Context, key Key) (ctrl.Result, error) {
	sec, ok := r.Secondaries.Secondary(key.Cluster)
	if !ok {
		// Removed from Flotilla (a detached cluster is still known): its copies went with its
		// FlotillaPrimary, or were orphaned on purpose. Nothing to requeue, nothing to remember.
		r.forget(key)
		return ctrl.Result{}, nil
	}
	if !sec.Running {
		return ctrl.Result{RequeueAfter: unavailableRetry}, nil // no calls to a secondary that does not answer
	}
	if sec.OwnerUID == "" {
		return ctrl.Result{RequeueAfter: unavailableRetry}, nil
	}
	src, err := r.source(ctx, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	used := false
	if src != nil {
		if used, err = r.inUse(ctx, key, src); err != nil {
			return ctrl.Result{}, err
		}
	}
	if used {
		r.setUnused(key, false)
		return ctrl.Result{}, r.sync(ctx, sec, key, src)
	}
	return r.release(ctx, sec, key)
}

// source is the primary's object (metadata only for kinds read through the metadata watch), nil
// when it is gone.
func (r *Reconciler) source(ctx context.Context, key Key) (client.Object, error) {
	kind, ok := translate.DependencyKindOf(key.Kind)
	switch {
	case !ok || !kind.Synced():
		return nil, fmt.Errorf("unknown kind %q", key.Kind)
	case kind.Read == translate.ReadMetadata:
		rv, ok := r.Versions.Version(key.Kind, key.Namespace, key.Name)
		if !ok {
			return nil, nil
		}
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, ResourceVersion: rv}}, nil
	}
	var obj client.Object = kind.New()
	if err := r.Cache.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	return obj, nil
}

// inUse says whether a live proxy bound to the key's secondary references or is selected by src.
func (r *Reconciler) inUse(ctx context.Context, key Key, src client.Object) (bool, error) {
	var proxies corev1.PodList
	if err := r.Cache.List(ctx, &proxies, client.InNamespace(key.Namespace)); err != nil {
		return false, fmt.Errorf("listing proxies in %s: %w", key.Namespace, err)
	}
	kind, _ := translate.DependencyKindOf(key.Kind)
	uses, err := r.usedBy(ctx, kind, src)
	if err != nil {
		return false, err
	}
	node := flotillav1.VirtualNodeName(key.Cluster)
	for i := range proxies.Items {
		p := &proxies.Items[i]
		if p.Spec.NodeName == node && !translate.Terminal(p) && uses(p) {
			return true, nil
		}
	}
	return false, nil
}

// usedBy says which proxies use obj, of kind: those that reference it or that it selects, and for
// a kind that sends to Services (an Ingress), those its backend Services select.
func (r *Reconciler) usedBy(ctx context.Context, kind translate.DependencyKind, obj client.Object) (func(*corev1.Pod) bool, error) {
	if kind.Use != translate.UseBackends {
		return func(p *corev1.Pod) bool { return translate.Uses(p, kind.Kind, obj) }, nil
	}
	backends, err := r.backends(ctx, kind, obj)
	if err != nil {
		return nil, err
	}
	return func(p *corev1.Pod) bool { return selectedByAny(p, backends) }, nil
}

// backends reads the Services of the primary obj sends to (those that exist).
func (r *Reconciler) backends(ctx context.Context, kind translate.DependencyKind, obj client.Object) ([]*corev1.Service, error) {
	var out []*corev1.Service
	for _, name := range kind.Backends(obj) {
		svc := &corev1.Service{}
		err := r.Cache.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, svc)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("reading Service %s/%s of %s %s: %w", obj.GetNamespace(), name, kind.Kind, obj.GetName(), err)
		}
		out = append(out, svc)
	}
	return out, nil
}

// sync applies the copy when the primary's object changed since it was last copied.
func (r *Reconciler) sync(ctx context.Context, sec clusters.Secondary, key Key, src client.Object) error {
	rv := src.GetResourceVersion()
	r.mu.Lock()
	done := r.applied[key] == rv
	r.mu.Unlock()
	if done {
		return nil
	}
	owner := translate.Owner(r.Secondaries.PrimaryID(), sec.OwnerUID)
	kind, _ := translate.DependencyKindOf(key.Kind)
	if kind.Read == translate.ReadMetadata {
		full, err := r.read(ctx, kind, key)
		if err != nil || full == nil {
			return err
		}
		src, rv = full, full.GetResourceVersion()
	}
	var copied client.Object = kind.Copy(src, r.Secondaries.PrimaryID(), owner)
	if copied == nil {
		return fmt.Errorf("copying %s: no copy of a %T", key, src)
	}
	yielded, err := copies.Apply(ctx, sec.Client, copied)
	if err != nil {
		return err
	}
	if yielded {
		// A Replicator holds it: that satisfies the dependency, and it is not reflection's to
		// update or delete. Not recorded, so it is looked at again when the source changes.
		ctrl.LoggerFrom(ctx).V(logging.Debug).Info("Copy left to the Replicator that holds it", "copy", key.String())
		return nil
	}
	ctrl.LoggerFrom(ctx).V(logging.Debug).Info("Copy updated", "copy", key.String())
	r.mu.Lock()
	if r.applied == nil {
		r.applied, r.written = map[Key]string{}, map[Key]string{}
	}
	r.applied[key] = rv
	r.written[key] = copied.GetResourceVersion()
	r.mu.Unlock()
	return nil
}

// read gets the primary's object in full; nil when it is gone or never copied.
func (r *Reconciler) read(ctx context.Context, kind translate.DependencyKind, key Key) (client.Object, error) {
	var obj client.Object = kind.New()
	if err := r.Primary.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s %s/%s: %w", key.Kind, key.Namespace, key.Name, err)
	}
	if kind.NotCopied != nil && kind.NotCopied(obj) != "" {
		return nil, nil // the secondary has its own
	}
	return obj, nil
}

// release removes a copy nobody in its secondary used for Grace. A copy Flotilla's reflection
// does not own (a Replicator's, or one it never made) is left alone.
func (r *Reconciler) release(ctx context.Context, sec clusters.Secondary, key Key) (ctrl.Result, error) {
	if unused := r.now().Sub(r.setUnused(key, true)); unused < r.Grace {
		return ctrl.Result{RequeueAfter: r.Grace - unused}, nil
	}
	if err := r.deleteCopy(ctx, sec, key); err != nil {
		return ctrl.Result{}, err
	}
	r.forget(key)
	return ctrl.Result{}, nil
}

// forget drops what is remembered of a copy.
func (r *Reconciler) forget(key Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.applied, key)
	delete(r.written, key)
	delete(r.unusedSince, key)
}

func (r *Reconciler) deleteCopy(ctx context.Context, sec clusters.Secondary, key Key) error {
	kind, ok := translate.DependencyKindOf(key.Kind)
	if !ok {
		return fmt.Errorf("removing unused %s: unknown kind", key)
	}
	var obj client.Object = kind.New()
	obj.SetNamespace(key.Namespace)
	obj.SetName(key.Name)
	var rv string
	if kind.WriteOnly {
		// Never read in a secondary: deleted only as reflection last wrote it (and the admission
		// policy installed at join lets Flotilla delete only Secrets that carry its label).
		r.mu.Lock()
		rv = r.written[key]
		r.mu.Unlock()
		if rv == "" {
			return nil
		}
	} else {
		if err := sec.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return client.IgnoreNotFound(err)
		}
		if !reflectionCopy(obj, r.Secondaries.PrimaryID()) {
			return nil
		}
		rv = obj.GetResourceVersion()
	}
	err := sec.Client.Delete(ctx, obj, client.Preconditions{ResourceVersion: &rv})
	switch {
	case apierrors.IsConflict(err):
		ctrl.LoggerFrom(ctx).Info("Unused copy changed since reflection wrote it: left in place", "copy", key.String())
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("removing unused %s: %w", key, err)
	}
	ctrl.LoggerFrom(ctx).V(logging.Debug).Info("Unused copy removed", "copy", key.String())
	return nil
}

// reflectionCopy says whether a copy read in a secondary is this primary's reflection's and no
// Replicator's: its owner annotation and primary label, and no field held by a Replicator.
func reflectionCopy(obj client.Object, primaryID string) bool {
	return obj.GetAnnotations()[flotillav1.AnnotationOwner] == flotillav1.OwnerReflect &&
		obj.GetLabels()[flotillav1.LabelPrimary] == primaryID && !ssa.Holds(obj, flotillav1.FieldManagerReplicator)
}

// setUnused records (unused) or forgets (used) when the key was first seen unused, and returns it.
func (r *Reconciler) setUnused(key Key, unused bool) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !unused {
		delete(r.unusedSince, key)
		return time.Time{}
	}
	if r.unusedSince == nil {
		r.unusedSince = map[Key]time.Time{}
	}
	since, ok := r.unusedSince[key]
	if !ok {
		since = r.now()
		r.unusedSince[key] = since
	}
	return since
}

func (r *Reconciler) now() time.Time { return clocks.Now(r.Clock) }
