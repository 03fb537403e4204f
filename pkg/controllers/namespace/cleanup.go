package namespace

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// Registry is what the cleanup needs of the cluster registry.
type Registry interface {
	Snapshots() []clusters.Snapshot
	Secondary(name string) (clusters.Secondary, bool)
	PrimaryID() string
}

// Cleanup deletes, in every Running secondary, the namespaces Flotilla created for delegates whose
// primary namespace is gone and that hold nothing not Flotilla's.
type Cleanup struct {
	// Primary reads the primary's namespaces (the manager's cache).
	Primary client.Reader
	// Informer is the primary's namespace informer: a deletion there starts a pass at once.
	Informer cache.Informer
	Registry Registry
	// Interval is the slow pass (deletions missed while the manager was down).
	Interval time.Duration
	Log      logr.Logger
}

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
		switch err := c.Primary.Get(ctx, client.ObjectKey{Name: ns.Name}, &corev1.Namespace{}); {
		case err == nil:
			continue // still in the primary
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("reading namespace %s in the primary: %w", ns.Name, err)
		}
		foreign, err := clusters.HoldsForeign(ctx, sec.Client, ns.Name, clusters.ReadableKinds(), func(o client.Object) bool {
			return o.GetLabels()[flotillav1.LabelPrimary] == id
		})
		if err != nil {
			return err
		}
		if foreign != "" {
			c.Log.V(1).Info("Namespace kept: it holds what is not Flotilla's", "cluster", sec.Name, "namespace", ns.Name, "object", foreign)
			continue
		}
		if err := sec.Client.Delete(ctx, ns, client.Preconditions{UID: &ns.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting namespace %s: %w", ns.Name, err)
		}
		c.Log.Info("Namespace deleted: Flotilla created it, the primary's is gone, nothing else is in it", "cluster", sec.Name, "namespace", ns.Name)
	}
	return nil
}

// CreatedForDelegates says whether a namespace of a secondary is one Flotilla created for
// delegates: this primary's managed-by and primary labels (an admin's managed-by label alone
// only opens a namespace), not a Replicator's (it removes its own), not already going.
func CreatedForDelegates(ns *corev1.Namespace, primaryID string) bool {
	_, replicator := ns.Annotations[flotillav1.AnnotationCreatedBy]
	return clusters.CreatedByFlotilla(ns, primaryID) && !replicator && ns.DeletionTimestamp.IsZero()
}
