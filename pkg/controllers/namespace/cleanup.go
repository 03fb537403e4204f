package namespace

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/flotilla-dev/flotilla/internal/clocks"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/delegates"
	"github.com/flotilla-dev/flotilla/pkg/logging"
)

// Registry is what the cleanup needs of the cluster registry.
type Registry interface {
	Snapshots() []clusters.Snapshot
	Secondary(name string) (clusters.Secondary, bool)
	PrimaryID() string
}

// Cleanup deletes, in every Running secondary, the namespaces Flotilla created for delegates that
// hold nothing not Flotilla's, once the primary's namespace is gone, or once nothing at all has
// been in them (no delegate, no copy) for Grace.
type Cleanup struct {
	// Primary reads the primary's namespaces and proxies (the manager's cache).
	Primary client.Reader
	// Informer is the primary's namespace informer: a deletion there starts a pass at once.
	Informer cache.Informer
	Registry Registry
	// Interval paces the passes (deletions missed while the manager was down, idle namespaces).
	Interval time.Duration
	// Grace is how long a namespace stays empty before it goes while the primary's exists: the
	// dependency grace, after which the last copies have gone too.
	Grace time.Duration
	Log   logr.Logger
	// Clock measures Grace (default: the real one).
	Clock clock.PassiveClock

	// emptySince is when each namespace (cluster/name) was first seen empty, until it is not.
	emptySince map[string]time.Time
}

// now is the cleanup's clock.
func (c *Cleanup) now() time.Time { return clocks.Now(c.Clock) }

// NeedLeaderElection says yes: one replica deletes.
func (c *Cleanup) NeedLeaderElection() bool { return true }

// Start runs a pass at each primary namespace deletion and every Interval until ctx ends.
func (c *Cleanup) Start(ctx context.Context) error {
	kick := make(chan struct{}, 1)
	if c.Informer != nil {
		reg, err := c.Informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(any) {
			select {
			case kick <- struct{}{}:
			default: // a pass is due already
			}
		}})
		if err != nil {
			return fmt.Errorf("watching namespace deletions: %w", err)
		}
		defer func() { _ = c.Informer.RemoveEventHandler(reg) }()
	}
	c.emptySince = map[string]time.Time{}
	ticker := time.NewTicker(c.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-ticker.C:
		}
		c.pass(ctx)
	}
}

// pass looks at every Running secondary once.
func (c *Cleanup) pass(ctx context.Context) {
	for _, snap := range c.Registry.Snapshots() {
		if !snap.UsableSecondary() || snap.Status != flotillav1.ClusterRunning {
			continue
		}
		sec, ok := c.Registry.Secondary(snap.Name)
		if !ok {
			continue
		}
		if err := c.cleanSecondary(ctx, sec); err != nil && ctx.Err() == nil {
			c.Log.Error(err, "Removing namespaces Flotilla created failed", "cluster", sec.Name)
		}
	}
}

func (c *Cleanup) cleanSecondary(ctx context.Context, sec clusters.Secondary) error {
	id := c.Registry.PrimaryID()
	var list corev1.NamespaceList
	if err := sec.Client.List(ctx, &list, client.MatchingLabels{flotillav1.LabelManagedBy: id, flotillav1.LabelPrimary: id}); err != nil {
		return fmt.Errorf("listing namespaces: %w", err)
	}
	for i := range list.Items {
		ns := &list.Items[i]
		if !CreatedForDelegates(ns, id) {
			continue
		}
		key := sec.Name + "/" + ns.Name
		state, err := c.gather(ctx, sec, ns.Name)
		if err != nil {
			return err
		}
		v := Decide(state, c.emptySince[key], c.now(), c.Grace)
		if v.EmptySince.IsZero() {
			delete(c.emptySince, key)
		} else {
			c.emptySince[key] = v.EmptySince
		}
		if !v.Delete {
			if state.Foreign != "" {
				c.Log.V(logging.Debug).Info("Namespace kept: it holds what is not Flotilla's", "cluster", sec.Name, "namespace", ns.Name, "object", state.Foreign)
			}
			continue
		}
		if err := sec.Client.Delete(ctx, ns, client.Preconditions{UID: &ns.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting namespace %s: %w", ns.Name, err)
		}
		delete(c.emptySince, key)
		c.Log.Info("Namespace deleted: "+v.Why, "cluster", sec.Name, "namespace", ns.Name)
	}
	return nil
}

// gather reads what Decide needs about one namespace Flotilla created in a secondary. The cheap
// facts first: a namespace with a delegate in the cache, or a proxy bound to this secondary, is in
// use and its contents are not listed.
func (c *Cleanup) gather(ctx context.Context, sec clusters.Secondary, name string) (State, error) {
	id := c.Registry.PrimaryID()
	var s State
	switch err := c.Primary.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{}); {
	case err == nil:
		s.InPrimary = true
	case !apierrors.IsNotFound(err):
		return s, fmt.Errorf("reading namespace %s in the primary: %w", name, err)
	}
	if s.InPrimary {
		var err error
		if s.InUse, err = c.inUse(ctx, sec, name); err != nil || s.InUse {
			return s, err
		}
	}
	foreign, ours, err := clusters.Contents(ctx, sec.Client, name, clusters.ReadableKinds(), func(o client.Object) bool {
		return o.GetLabels()[flotillav1.LabelPrimary] == id
	})
	s.Foreign, s.HoldsOurs = foreign, ours
	if err != nil {
		return s, err
	}
	s.Imported, err = imported(ctx, sec, name, id)
	return s, err
}

// imported says whether the namespace holds this primary's ServiceImports (Multi-Cluster
// Services, which may make the namespace there for an export the primary's namespace lacks):
// the MCS controller removes them when the name is no longer exported, and the namespace is
// left to it until then. A secondary without the ServiceImport API holds none.
func imported(ctx context.Context, sec clusters.Secondary, name, primaryID string) (bool, error) {
	var imports mcsv1beta1.ServiceImportList
	err := sec.Client.List(ctx, &imports, client.InNamespace(name), client.MatchingLabels{flotillav1.LabelPrimary: primaryID}, client.Limit(1))
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("listing the ServiceImports of %s: %w", name, err)
	}
	return len(imports.Items) > 0, nil
}

// inUse says whether a delegate of the namespace is in the secondary's cache or a proxy of the
// namespace is bound to the secondary's virtual node (its delegate may be on its way).
func (c *Cleanup) inUse(ctx context.Context, sec clusters.Secondary, name string) (bool, error) {
	live, synced := delegates.List(sec)
	if !synced {
		return true, nil // nothing proven yet
	}
	for _, d := range live {
		if d.Namespace == name {
			return true, nil
		}
	}
	var proxies corev1.PodList
	if err := c.Primary.List(ctx, &proxies, client.InNamespace(name), client.MatchingLabels{flotillav1.LabelProxy: "true"}); err != nil {
		return false, fmt.Errorf("listing proxies in %s: %w", name, err)
	}
	node := flotillav1.VirtualNodeName(sec.Name)
	for _, p := range proxies.Items {
		if p.Spec.NodeName == node {
			return true, nil
		}
	}
	return false, nil
}

// State is what the cleanup knows of a namespace Flotilla created in a secondary.
type State struct {
	// InPrimary says the primary's namespace of that name exists.
	InPrimary bool
	// InUse says a delegate is there or a proxy is bound to that secondary (read only while
	// InPrimary; the contents are then not listed).
	InUse bool
	// Foreign names the first object there that is not Flotilla's ("" when none).
	Foreign string
	// HoldsOurs says something of Flotilla's is there (a delegate, a copy).
	HoldsOurs bool
	// Imported says this primary's ServiceImports are there: the MCS controller's until the name
	// is no longer exported.
	Imported bool
}

// Verdict is what to do with the namespace.
type Verdict struct {
	Delete bool
	// EmptySince is when it was first seen empty (zero: it is not).
	EmptySince time.Time
	// Why is the reason of a deletion, for the log.
	Why string
}

// Decide is the cleanup's whole rule for one namespace, given when it was first seen empty:
//   - something not Flotilla's is there: kept, whatever else holds;
//   - an import of Multi-Cluster Services is there: kept (an export elsewhere needs it, the
//     primary's namespace of that name or not; deleted, it would be made again at once);
//   - the primary's namespace is gone: deleted, with whatever of Flotilla's is left;
//   - in use, or holding anything of Flotilla's (a copy lives out its grace): kept;
//   - empty: kept while it has been so for less than grace, then deleted. A namespace seen empty
//     for the first time is never deleted in that pass.
func Decide(s State, emptySince, now time.Time, grace time.Duration) Verdict {
	switch {
	case s.Foreign != "", s.Imported:
		return Verdict{}
	case !s.InPrimary:
		return Verdict{Delete: true, Why: "Flotilla created it, the primary's is gone, nothing else is in it"}
	case s.InUse || s.HoldsOurs:
		return Verdict{}
	case emptySince.IsZero():
		return Verdict{EmptySince: now}
	case now.Sub(emptySince) >= grace:
		return Verdict{Delete: true, EmptySince: emptySince, Why: "Flotilla created it and nothing has been in it for the dependency grace"}
	default:
		return Verdict{EmptySince: emptySince}
	}
}

// CreatedForDelegates says whether a namespace of a secondary is one Flotilla created for
// delegates: this primary's managed-by and primary labels (an admin's managed-by label alone
// only opens a namespace), not a Replicator's (it removes its own), not already going.
func CreatedForDelegates(ns *corev1.Namespace, primaryID string) bool {
	_, replicator := ns.Annotations[flotillav1.AnnotationCreatedBy]
	return clusters.CreatedByFlotilla(ns, primaryID) && !replicator && ns.DeletionTimestamp.IsZero()
}
