package mcs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/flotilla-dev/flotilla/pkg/access"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/mcs"
	"github.com/flotilla-dev/flotilla/pkg/ssa"
)

// FieldManager is the field manager of what this controller applies.
const FieldManager = "flotilla-mcs"

// Tenancy is what the controller reads of the namespaces' cluster sets.
type Tenancy interface {
	Denied(ctx context.Context, namespace string) (map[string]string, error)
}

// Reconciler keeps the ServiceImports of one exported name true in every cluster of the set.
type Reconciler struct {
	// Client reads the primary through the manager's cache and writes it.
	Client   client.Client
	Registry *clusters.Registry
	// PrimaryName is the primary's name in the set (its source-cluster label, --primary-name).
	PrimaryName string
	// FailoverAfter is how long a secondary may not answer before its endpoints leave the imports.
	FailoverAfter time.Duration
	Recorder      events.EventRecorder
	Clock         clock.PassiveClock
	// Tenancy says which secondaries a namespace may not use (its ClusterSetBindings; nil: every
	// one): there its exports do not count and no import is written.
	Tenancy Tenancy
	// WatchTenancy: the primary serves ClusterSets and ClusterSetBindings, and their changes wake
	// the names of the namespaces they concern.
	WatchTenancy bool
	// Applies paces the writes, across every cluster and name (nil: unpaced). A new leader, or
	// a restarted manager, remembers nothing it applied, so it applies every import, derived
	// Service and EndpointSlice once again: paced, the clusters' API servers get them at a rate
	// and no burst.
	Applies *rate.Limiter

	ledger ssa.Ledger
	// names are the exported names seen, enqueued again when a cluster's state changes.
	names sync.Map
}

// Reconcile decides the import of one exported name and applies it in every cluster it reaches.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// Until the registration Secret is applied the registry knows no secondary: a silent one
	// the primary's import lists would look like one that left, and lose its place in it.
	if wait, waiting := r.Registry.UntilConfigured(); waiting {
		return wait, nil
	}
	views, err := r.gather(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	plan := decide(req.NamespacedName, views, r.FailoverAfter)
	if plan.nothing {
		r.names.Delete(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	r.names.Store(req.NamespacedName, true)

	// Every cluster at once: one that answers slowly (or not at all, until its probes say so)
	// never delays the others.
	applied := make([]error, len(views))
	var wg sync.WaitGroup
	for i, v := range views {
		if v.known {
			wg.Go(func() { applied[i] = r.applyTo(ctx, req.NamespacedName, v, plan) })
		}
	}
	wg.Wait()
	failures := map[string]string{}
	var errs []error
	settled := false
	for i, err := range applied {
		if err == nil {
			continue
		}
		failures[views[i].name] = err.Error()
		if waits(err) {
			settled = true
		} else {
			errs = append(errs, err)
		}
	}
	statuses := make([]error, len(views))
	for i, v := range views {
		// An export where Flotilla may not write (a secondary's namespace not opened) is not
		// told: the fence refuses it.
		if v.known && v.export != nil && (v.primary || v.opened) {
			wg.Go(func() { statuses[i] = r.exportStatus(ctx, v, plan, failures) })
		}
	}
	wg.Wait()
	if err := errors.Join(append(errs, statuses...)...); err != nil {
		log.FromContext(ctx).V(1).Info("not everywhere yet", "error", err.Error())
		return ctrl.Result{}, err
	}
	if settled && (plan.recheckIn == 0 || plan.recheckIn > waitRecheck) {
		plan.recheckIn = waitRecheck
	}
	if plan.recheckIn > 0 {
		return ctrl.Result{RequeueAfter: plan.recheckIn}, nil
	}
	return ctrl.Result{}, nil
}

// plan is what a reconcile of one name does in every cluster.
type plan struct {
	// nothing: no export anywhere and nothing of this primary's left: the name is none of ours.
	nothing bool
	merged  mcs.Merged
	// keepImport: no export is known valid, but a cluster that does not answer had one: the
	// imports stay as they are.
	keepImport bool
	// members are the clusters the import lists: the valid exports known, and those of
	// clusters that do not answer as the primary's import lists them.
	members []string
	// slices are the EndpointSlices every cluster gets; keep are the source clusters whose
	// EndpointSlices are left as they are (they do not answer, within the failover bound).
	slices []*discoveryv1.EndpointSlice
	keep   []string
	// recheckIn is when a cluster that does not answer reaches the failover bound.
	recheckIn time.Duration
	// forbidden: the namespace is one Flotilla never writes in (kube-*, default,
	// flotilla-system): nothing is imported, and its exports say so.
	forbidden bool
}

// decide is the pure part of a reconcile: the merge of the known exports, what is kept of the
// clusters that do not answer, and the EndpointSlices every cluster gets.
func decide(key client.ObjectKey, views []*clusterView, failoverAfter time.Duration) plan {
	p := plan{forbidden: access.ForbiddenNamespace(key.Namespace)}
	var members []mcs.Member
	ours := false
	for _, v := range views {
		if !v.known {
			continue
		}
		m := mcs.Member{Cluster: v.name, Export: v.export, Service: v.service, Primary: v.primary}
		switch {
		case p.forbidden:
			m.Closed = fmt.Sprintf("Flotilla imports nothing into namespace %s: it never writes in kube-*, default or %s", key.Namespace, flotillav1.SystemNamespace)
		case !v.primary && v.denied != "":
			m.Closed, m.ClosedReason = fmt.Sprintf("namespace %s may not use cluster %s: %s; its exports there do not count", key.Namespace, v.name, v.denied), mcs.ReasonNamespaceDenied
		case !v.primary && !v.opened:
			m.Closed = fmt.Sprintf("namespace %s of cluster %s is not opened to Flotilla (label %s): its exports there do not count", key.Namespace, v.name, flotillav1.LabelManagedBy)
		}
		members = append(members, m)
		ours = ours || len(v.ours) > 0 || v.imported != nil || v.derived != nil
	}
	p.merged = mcs.Merge(members)
	p.members, p.keep, p.recheckIn = silentMembers(views, p.merged.Exporters, failoverAfter)
	switch {
	case p.merged.Spec == nil && len(p.members) > 0:
		p.keepImport = true
		return p
	case p.merged.Spec == nil:
		p.nothing = len(p.merged.Verdicts) == 0 && !ours
		return p
	}
	for _, v := range views {
		served, exporting := p.merged.Ports[v.name]
		if !v.known || !exporting {
			continue
		}
		for _, s := range v.sources {
			if out := mcs.Slice(key.Namespace, key.Name, v.name, served, s); out != nil {
				p.slices = append(p.slices, out)
			}
		}
	}
	return p
}

// silentMembers adds to the exporters known the clusters that do not answer but the primary's
// import lists: the import's members, sorted. Those silent for less than the failover bound
// keep their EndpointSlices (keep), and recheckIn is when the first of them reaches it.
func silentMembers(views []*clusterView, exporters []string, failoverAfter time.Duration) (members, keep []string, recheckIn time.Duration) {
	members = slices.Clone(exporters)
	down := map[string]time.Duration{}
	var listed []string
	for _, v := range views {
		if v.primary && v.imported != nil && ownedImport(v.imported) {
			for _, c := range v.imported.Status.Clusters {
				listed = append(listed, c.Cluster)
			}
		}
		if !v.known {
			down[v.name] = v.downFor
		}
	}
	for _, c := range listed {
		d, isDown := down[c]
		if !isDown || slices.Contains(members, c) {
			continue
		}
		members = append(members, c)
		if d < failoverAfter {
			keep = append(keep, c)
			if left := failoverAfter - d; recheckIn == 0 || left < recheckIn {
				recheckIn = left
			}
		}
	}
	sort.Strings(members)
	return members, keep, recheckIn
}

// ownedImport says whether an import is one Flotilla wrote (any primary's: the label says which).
func ownedImport(i *mcsv1beta1.ServiceImport) bool { return i.Labels[flotillav1.LabelPrimary] != "" }

// waitRecheck is how often a cluster that waits on someone else (a namespace missing in the
// primary, an object of another owner) is looked at again: no event says it changed.
const waitRecheck = time.Minute

// waits says whether a cluster's failure waits on someone else: reported on the exports, looked
// at again every waitRecheck, not retried at once.
func waits(err error) bool {
	var notOurs *NotOursError
	var missing *NamespaceMissingError
	var notManaged *clusters.NamespaceNotManagedError
	return errors.As(err, &notOurs) || errors.As(err, &missing) || errors.As(err, &notManaged)
}

// NamespaceMissingError is the primary without the namespace of an export elsewhere: Flotilla
// creates no namespace in the primary.
type NamespaceMissingError struct{ Namespace, Cluster string }

func (e *NamespaceMissingError) Error() string {
	return fmt.Sprintf("namespace %s does not exist in %s: create it there to import the Service", e.Namespace, e.Cluster)
}

// NotOursError is an object of the name an import needs that Flotilla did not write.
type NotOursError struct{ Kind, Cluster string }

func (e *NotOursError) Error() string {
	return fmt.Sprintf("a %s of that name in %s is not Flotilla's: it is left alone, and the import is not made there", e.Kind, e.Cluster)
}

// mayWrite says whether applyTo writes anything in a cluster: never in a forbidden namespace, nor
// in a cluster the namespace may not use (what this primary wrote there is removed),
// nor in a secondary's namespace not opened to this primary, where nothing of its can be (the
// fence lets it write only in namespaces opened to it): an import there needs the namespace made
// by Flotilla (when missing), or opened by its admin (NamespaceNotManagedError, a wait).
func (r *Reconciler) mayWrite(ctx context.Context, key client.ObjectKey, v *clusterView, p plan) (bool, error) {
	switch {
	case !v.primary && v.denied != "":
		// A cluster the namespace may not use gets no import; one made before the namespace's
		// sets changed is removed (only what this primary wrote, as when the name is withdrawn).
		if v.opened {
			return false, r.remove(ctx, v)
		}
		return false, nil
	case p.forbidden:
		return false, nil
	case v.primary || v.opened:
		return true, nil
	case p.merged.Spec == nil || p.keepImport:
		return false, nil
	}
	_, err := clusters.EnsureManagedNamespace(ctx, v.client, v.name, key.Namespace, r.Registry.PrimaryID(), nil, nil)
	return err == nil, err
}

// applyTo makes one cluster's import, derived Service and EndpointSlices what the plan says.
func (r *Reconciler) applyTo(ctx context.Context, key client.ObjectKey, v *clusterView, p plan) error {
	if ok, err := r.mayWrite(ctx, key, v, p); !ok || err != nil {
		return err
	}
	id := r.Registry.PrimaryID()
	if v.imported != nil && v.imported.Labels[flotillav1.LabelPrimary] != id {
		return &NotOursError{Kind: "ServiceImport", Cluster: v.name}
	}
	if v.derived != nil && v.derived.Labels[flotillav1.LabelPrimary] != id {
		return &NotOursError{Kind: "Service " + v.derived.Name, Cluster: v.name}
	}
	if p.merged.Spec == nil && !p.keepImport {
		return r.remove(ctx, v)
	}
	if p.keepImport {
		return r.pruneSlices(ctx, v, p)
	}
	if v.imported == nil {
		if err := r.ensureNamespace(ctx, v, key.Namespace); err != nil {
			return err
		}
	}
	spec := p.merged.Spec.DeepCopy()
	if err := r.applyAddress(ctx, key, v, spec, p.slices); err != nil {
		return err
	}
	imp := &mcsv1beta1.ServiceImport{TypeMeta: metav1.TypeMeta{APIVersion: mcsv1beta1.SchemeGroupVersion.String(), Kind: "ServiceImport"},
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Annotations: maps.Clone(p.merged.Annotations),
			Labels: maps.Clone(p.merged.Labels)}, Spec: *spec}
	if imp.Labels == nil {
		imp.Labels = map[string]string{}
	}
	imp.Labels[flotillav1.LabelPrimary] = id
	var live client.Object
	if v.imported != nil {
		live = v.imported
	}
	applied, err := r.apply(ctx, v, imp, live)
	if err != nil {
		return fmt.Errorf("applying ServiceImport %s in %s: %w", key, v.name, err)
	}
	if err := r.importStatus(ctx, v, applied.(*mcsv1beta1.ServiceImport), p); err != nil {
		return err
	}
	for _, s := range p.slices {
		s := s.DeepCopy()
		s.TypeMeta = metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"}
		s.Labels[flotillav1.LabelPrimary] = id
		var live client.Object
		if i := slices.IndexFunc(v.ours, func(o *discoveryv1.EndpointSlice) bool { return o.Name == s.Name }); i >= 0 {
			live = v.ours[i]
		}
		if _, err := r.apply(ctx, v, s, live); err != nil {
			return fmt.Errorf("applying EndpointSlice %s/%s in %s: %w", s.Namespace, s.Name, v.name, err)
		}
	}
	return r.pruneSlices(ctx, v, p)
}

// ensureNamespace makes sure the namespace of an import exists in the cluster (namespace
// sameness): in a secondary one missing is created as Flotilla creates its namespaces (applyTo
// has refused one that exists without being opened to this primary); the primary's namespaces
// are its users', never created.
func (r *Reconciler) ensureNamespace(ctx context.Context, v *clusterView, name string) error {
	var ns corev1.Namespace
	err := v.client.Get(ctx, client.ObjectKey{Name: name}, &ns)
	switch {
	case err == nil:
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading namespace %s in %s: %w", name, v.name, err)
	case v.primary:
		return &NamespaceMissingError{Namespace: name, Cluster: v.name}
	}
	_, err = clusters.EnsureManagedNamespace(ctx, v.client, v.name, name, r.Registry.PrimaryID(), nil, nil)
	return err
}

// applyAddress gives the import's spec its addresses in the cluster: a ClusterSetIP import the
// cluster IPs of its derived Service (applied), a headless one its families only (and no
// derived Service).
func (r *Reconciler) applyAddress(ctx context.Context, key client.ObjectKey, v *clusterView, spec *mcsv1beta1.ServiceImportSpec, ss []*discoveryv1.EndpointSlice) error {
	id := r.Registry.PrimaryID()
	if spec.Type != mcsv1beta1.ClusterSetIP {
		if v.derived != nil {
			if err := r.deleteOurs(ctx, v, v.derived); err != nil {
				return err
			}
		}
		if v.service != nil {
			spec.IPFamilies = slices.Clone(v.service.Spec.IPFamilies)
		} else {
			spec.IPFamilies = familiesOf(ss)
		}
		return nil
	}
	derived := mcs.DerivedService(key.Namespace, key.Name, spec)
	derived.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
	derived.Labels = map[string]string{flotillav1.LabelPrimary: id, mcsv1beta1.LabelServiceName: key.Name}
	var live client.Object
	if v.derived != nil {
		live = v.derived
	}
	applied, err := r.apply(ctx, v, derived, live)
	if err != nil {
		return fmt.Errorf("applying Service %s in %s: %w", derived.Name, v.name, err)
	}
	d := applied.(*corev1.Service)
	spec.IPs, spec.IPFamilies = slices.Clone(d.Spec.ClusterIPs), slices.Clone(d.Spec.IPFamilies)
	return nil
}

// apply applies obj in the cluster unless the ledger says the live object is what was applied.
func (r *Reconciler) apply(ctx context.Context, v *clusterView, obj, live client.Object) (client.Object, error) {
	hash, err := ssa.Hash(obj)
	if err != nil {
		return nil, err
	}
	key := ledgerKey(v, obj)
	now := r.Clock.Now()
	if live != nil && r.ledger.Unchanged(key, hash, ssa.Version(live), true, now, 0) {
		return live, nil
	}
	if r.Applies != nil {
		if err := r.Applies.Wait(ctx); err != nil {
			return nil, fmt.Errorf("waiting for the pace of the applies: %w", err)
		}
	}
	if _, err := ssa.Apply(ctx, v.client, obj, FieldManager); err != nil {
		r.ledger.Forget(key)
		return nil, err
	}
	r.ledger.Record(key, hash, ssa.Version(obj), now)
	return obj, nil
}

// importStatus sets the import's clusters and whether its EndpointSlices are there.
func (r *Reconciler) importStatus(ctx context.Context, v *clusterView, imp *mcsv1beta1.ServiceImport, p plan) error {
	want := mcsv1beta1.ServiceImportStatus{EndpointSliceObjects: mcsv1beta1.EndpointSliceObjectsPresent}
	for _, c := range p.members {
		want.Clusters = append(want.Clusters, mcsv1beta1.ClusterStatus{Cluster: c})
	}
	want.Conditions = imp.Status.Conditions
	if equalStatus(imp.Status, want) {
		return nil
	}
	imp.Status = want
	if err := v.client.Status().Update(ctx, imp); err != nil {
		return fmt.Errorf("writing the status of ServiceImport %s/%s in %s: %w", imp.Namespace, imp.Name, v.name, err)
	}
	return nil
}

func equalStatus(a, b mcsv1beta1.ServiceImportStatus) bool {
	return a.EndpointSliceObjects == b.EndpointSliceObjects && slices.Equal(a.Clusters, b.Clusters)
}

// pruneSlices deletes this primary's EndpointSlices of the name in the cluster that the plan
// does not have, but those of source clusters it keeps.
func (r *Reconciler) pruneSlices(ctx context.Context, v *clusterView, p plan) error {
	for _, o := range v.ours {
		if slices.Contains(p.keep, o.Labels[mcsv1beta1.LabelSourceCluster]) ||
			slices.ContainsFunc(p.slices, func(s *discoveryv1.EndpointSlice) bool { return s.Name == o.Name }) {
			continue
		}
		if err := r.deleteOurs(ctx, v, o); err != nil {
			return err
		}
	}
	return nil
}

// remove deletes this primary's import, derived Service and EndpointSlices of the name in the
// cluster: no export is left.
func (r *Reconciler) remove(ctx context.Context, v *clusterView) error {
	for _, o := range v.ours {
		if err := r.deleteOurs(ctx, v, o); err != nil {
			return err
		}
	}
	if v.derived != nil {
		if err := r.deleteOurs(ctx, v, v.derived); err != nil {
			return err
		}
	}
	if v.imported != nil {
		return r.deleteOurs(ctx, v, v.imported)
	}
	return nil
}

// deleteIfOurs deletes obj when it carries this primary's label, preconditioned on the UID and
// resourceVersion read, so an object made again meanwhile (by anyone) is not the one deleted.
// ledgerKey is what the ledger remembers an object of a cluster by.
func ledgerKey(v *clusterView, obj client.Object) string {
	return v.name + "/" + fmt.Sprintf("%T", obj) + "/" + obj.GetNamespace() + "/" + obj.GetName()
}

// deleteOurs deletes an object this primary wrote in a cluster (deleteIfOurs) and forgets what
// the ledger remembered of it: a name exported once leaves nothing in memory once withdrawn.
func (r *Reconciler) deleteOurs(ctx context.Context, v *clusterView, obj client.Object) error {
	if err := deleteIfOurs(ctx, v.client, obj, r.Registry.PrimaryID()); err != nil {
		return err
	}
	r.ledger.Forget(ledgerKey(v, obj))
	return nil
}

func deleteIfOurs(ctx context.Context, c client.Client, obj client.Object, primaryID string) error {
	if obj.GetLabels()[flotillav1.LabelPrimary] != primaryID {
		return nil
	}
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	err := c.Delete(ctx, obj, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

func familiesOf(ss []*discoveryv1.EndpointSlice) []corev1.IPFamily {
	var out []corev1.IPFamily
	for _, s := range ss {
		f := corev1.IPv4Protocol
		if s.AddressType == discoveryv1.AddressTypeIPv6 {
			f = corev1.IPv6Protocol
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// exportStatus writes a ServiceExport's Valid, Ready and Conflict conditions.
func (r *Reconciler) exportStatus(ctx context.Context, v *clusterView, p plan, failures map[string]string) error {
	verdict := p.merged.Verdicts[v.name]
	ready, reason, why := true, mcsv1beta1.ServiceExportReasonExported, fmt.Sprintf("imported in every cluster of the set that answers (exported by %s)", strings.Join(p.members, ", "))
	if !verdict.Valid {
		ready, reason, why = false, mcsv1beta1.ServiceExportReasonFailed, "not exported: "+verdict.InvalidWhy
	} else if len(failures) > 0 {
		var parts []string
		for _, c := range slices.Sorted(maps.Keys(failures)) {
			parts = append(parts, c+": "+failures[c])
		}
		ready, reason, why = false, mcsv1beta1.ServiceExportReasonPending, "not imported everywhere yet: "+strings.Join(parts, "; ")
	}
	e := v.export.DeepCopy()
	changed := false
	for _, c := range verdict.Conditions(e.Generation, ready, reason, why) {
		changed = meta.SetStatusCondition(&e.Status.Conditions, c) || changed
	}
	if !verdict.Valid {
		changed = meta.RemoveStatusCondition(&e.Status.Conditions, string(mcsv1beta1.ServiceExportConditionConflict)) || changed
	}
	if !changed {
		return nil
	}
	if err := v.client.Status().Update(ctx, e); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil // a newer export is on its way here
		}
		return fmt.Errorf("writing the status of ServiceExport %s/%s in %s: %w", e.Namespace, e.Name, v.name, err)
	}
	if v.primary && r.Recorder != nil && len(verdict.ConflictReasons) > 0 {
		r.Recorder.Eventf(e, nil, corev1.EventTypeWarning, "Conflict", "Export", "%s", verdict.ConflictWhy)
	}
	return nil
}
