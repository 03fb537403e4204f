package views

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/internal/clocks"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

// Registry is what the gatherer reads of the cluster registry.
type Registry interface {
	Snapshots() []clusters.Snapshot
}

// Gatherer builds the cluster views of this replica.
type Gatherer struct {
	Registry Registry
	// VirtualNodes reads the clusters' virtual nodes (the manager's cache): a cordoned or tainted
	// one takes no new proxy (nil: not read).
	VirtualNodes client.Reader
	// Clock is what a virtual node's failover taint is measured against (nil: the real clock).
	Clock clock.PassiveClock
	// Tenancy reads the ClusterSets and a namespace's ClusterSetBindings (the manager's cache;
	// nil: no tenancy, every namespace may use every cluster).
	Tenancy client.Reader
	// DefaultDeny: a namespace bound to no ClusterSet uses no cluster (--tenancy-default-deny).
	DefaultDeny bool
}

// ForNamespace is Views with the clusters the namespace may not use marked (placement.Tenancy).
func (g *Gatherer) ForNamespace(ctx context.Context, namespace string) ([]placement.ClusterView, error) {
	views, err := g.Views(ctx)
	if err != nil {
		return nil, err
	}
	t, err := g.TenancyOf(ctx, namespace)
	if err != nil {
		return nil, err
	}
	return t.Deny(views), nil
}

// Denied maps each usable secondary the namespace may not use (placement.Tenancy) to why. A
// namespace bound to no set in a fleet that does not deny by default is denied nothing, and no
// cluster is gathered for it: the Replicator and Multi-Cluster Services controllers ask on every
// pass.
func (g *Gatherer) Denied(ctx context.Context, namespace string) (map[string]string, error) {
	t, err := g.TenancyOf(ctx, namespace)
	if err != nil || (len(t.Bound) == 0 && !t.DefaultDeny) {
		return nil, err
	}
	views, err := g.Views(ctx)
	if err != nil {
		return nil, err
	}
	denied := map[string]string{}
	for _, v := range t.Deny(views) {
		if v.Denied != "" {
			denied[v.Name] = v.Denied
		}
	}
	return denied, nil
}

// TenancyOf is what a namespace may use: the sets bound to it and every set.
func (g *Gatherer) TenancyOf(ctx context.Context, namespace string) (placement.Tenancy, error) {
	t := placement.Tenancy{Namespace: namespace, DefaultDeny: g.DefaultDeny}
	if g.Tenancy == nil {
		t.DefaultDeny = false
		return t, nil
	}
	var bindings flotillav1.ClusterSetBindingList
	if err := g.Tenancy.List(ctx, &bindings, client.InNamespace(namespace)); meta.IsNoMatchError(err) {
		// The primary does not serve ClusterSetBindings (their CRD is not installed): no namespace
		// is bound, and admission goes on as before cluster sets existed.
		t.DefaultDeny = false
		return t, nil
	} else if err != nil {
		return t, fmt.Errorf("listing the ClusterSetBindings of %s: %w", namespace, err)
	}
	for _, b := range bindings.Items {
		t.Bound = append(t.Bound, b.Spec.ClusterSet)
	}
	if len(t.Bound) == 0 {
		return t, nil
	}
	var sets flotillav1.ClusterSetList
	if err := g.Tenancy.List(ctx, &sets); err != nil {
		return t, fmt.Errorf("listing ClusterSets: %w", err)
	}
	for _, s := range sets.Items {
		t.Sets = append(t.Sets, SetView(&s))
	}
	return t, nil
}

// SetView is a ClusterSet as placement judges it.
func SetView(s *flotillav1.ClusterSet) placement.ClusterSetView {
	return placement.ClusterSetView{Name: s.Name, Clusters: s.Spec.Clusters, Selector: s.Spec.Selector}
}

// Views is every usable secondary as placement sees it now, its virtual node included.
func (g *Gatherer) Views(ctx context.Context) ([]placement.ClusterView, error) {
	views := FromSnapshots(g.Registry.Snapshots())
	for i := range views {
		if err := g.withVirtualNode(ctx, &views[i]); err != nil {
			return nil, err
		}
	}
	return views, nil
}

// View is one cluster's view (false: it is not a usable secondary); only its own virtual node is
// read.
func (g *Gatherer) View(ctx context.Context, name string) (placement.ClusterView, bool, error) {
	for _, v := range FromSnapshots(g.Registry.Snapshots()) {
		if v.Name == name {
			err := g.withVirtualNode(ctx, &v)
			return v, err == nil, err
		}
	}
	return placement.ClusterView{}, false, nil
}

// withVirtualNode adds to a view what its virtual node says (placement.WithVirtualNode); a node
// not made yet says nothing.
func (g *Gatherer) withVirtualNode(ctx context.Context, v *placement.ClusterView) error {
	if g.VirtualNodes == nil {
		return nil
	}
	var n corev1.Node
	err := g.VirtualNodes.Get(ctx, client.ObjectKey{Name: flotillav1.VirtualNodeName(v.Name)}, &n)
	if apierrors.IsNotFound(err) {
		return nil // not made yet: nothing of the user's to respect
	}
	if err != nil {
		return fmt.Errorf("reading virtual node %s: %w", flotillav1.VirtualNodeName(v.Name), err)
	}
	placement.WithVirtualNode(v, &n, g.now())
	return nil
}

func (g *Gatherer) now() time.Time { return clocks.Now(g.Clock) }

// FromSnapshots turns registry snapshots into cluster views, without their virtual nodes: the
// usable secondaries, Ready once running with their capacity known.
func FromSnapshots(snaps []clusters.Snapshot) []placement.ClusterView {
	var out []placement.ClusterView
	for _, s := range snaps {
		if !s.UsableSecondary() {
			continue
		}
		v := placement.ClusterView{Name: s.Name, Ready: s.Status == flotillav1.ClusterRunning && s.CapacitySynced,
			Reason: s.Reason, Labels: s.VirtualNodeLabels(), NoClaims: s.StorageClass == clusters.StorageClassNone}
		if v.Ready || s.Reason == "" {
			v.Reason = "capacity not known yet"
		}
		for _, n := range s.Capacity.Nodes {
			v.Nodes = append(v.Nodes, placement.NodeView{Name: n.Name, Labels: n.Labels, Taints: n.Taints, Free: n.Free, Allocatable: n.Allocatable})
		}
		v.Lent = clusters.Room(s.Allowance, s.AllowanceUsed)
		v.Devices = s.Capacity.Devices
		out = append(out, v)
	}
	return out
}
