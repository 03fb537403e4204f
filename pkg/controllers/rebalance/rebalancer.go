package rebalance

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/internal/clocks"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters/views"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

// Rebalancer moves elected pods back to secondaries that returned from a failover.
type Rebalancer struct {
	// Client reads the virtual nodes and proxies (the manager's cache) and evicts pods.
	Client client.Client
	// Views gathers the clusters placement.Rebalance plans over, once a round.
	Views *views.Gatherer
	// After is how long a returned secondary stays Ready before pods move back to it.
	After time.Duration
	// Interval paces the rounds; each evicts at most one pod per controller and PerRound in all.
	Interval time.Duration
	PerRound int
	Recorder events.EventRecorder
	Log      logr.Logger
	Clock    clock.PassiveClock

	returns Returns
}

// NeedLeaderElection says yes: one replica evicts.
func (r *Rebalancer) NeedLeaderElection() bool { return true }

func (r *Rebalancer) now() time.Time { return clocks.Now(r.Clock) }

// Start runs a round every Interval until ctx ends.
func (r *Rebalancer) Start(ctx context.Context) error {
	ticker := time.NewTicker(r.Interval)
	defer ticker.Stop()
	for {
		if err := r.Round(ctx); err != nil && ctx.Err() == nil {
			r.Log.Error(err, "Rebalance round failed")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// Round observes the virtual nodes and, for the secondaries due, evicts the next pod of each
// controller that holds too few there.
func (r *Rebalancer) Round(ctx context.Context) error {
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, client.HasLabels{flotillav1.LabelCluster}); err != nil {
		return fmt.Errorf("listing virtual nodes: %w", err)
	}
	now := r.now()
	r.returns.Observe(nodes.Items)
	due := r.returns.Due(nodes.Items, now, r.After)
	if len(due) == 0 {
		return nil
	}
	var proxies corev1.PodList
	if err := r.Client.List(ctx, &proxies, client.MatchingLabels{flotillav1.LabelProxy: "true"}); err != nil {
		return fmt.Errorf("listing proxies: %w", err)
	}
	clusters, err := r.Views.Views(ctx)
	if err != nil {
		return fmt.Errorf("gathering the clusters: %w", err)
	}
	groups, busy := placement.Groups(proxies.Items)
	uids := make([]types.UID, 0, len(groups))
	for uid := range groups {
		uids = append(uids, uid)
	}
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
	evicted, pending := 0, len(busy) > 0
	for _, uid := range uids {
		if evicted >= r.PerRound {
			pending = true
			break
		}
		tenancy, err := r.Views.TenancyOf(ctx, groups[uid][0].Namespace)
		if err != nil {
			return fmt.Errorf("reading what namespace %s may use: %w", groups[uid][0].Namespace, err)
		}
		split, err := placement.Rebalance(ctx, groups[uid], tenancy.Deny(clusters))
		if err != nil {
			r.Log.Info("Not rebalanced: no plan", "pod", client.ObjectKeyFromObject(groups[uid][0]), "reason", err.Error())
			continue
		}
		m := Next(split.Moves, due)
		if m == nil {
			continue
		}
		pending = true
		if err := r.evict(ctx, m); err != nil {
			r.Log.Info("Not rebalanced this round", "pod", client.ObjectKeyFromObject(m.Pod), "reason", err.Error())
			continue
		}
		evicted++
	}
	if !pending {
		for c := range due {
			r.Log.Info("Rebalance done", "cluster", c)
			r.forgetReturn(ctx, c, r.returns.Done(c))
		}
	}
	return nil
}

// forgetReturn removes a finished return's flotilla.dev/back-since from the cluster's virtual node
// (only that return's: a newer one stays), so that no later leader moves its pods back again.
func (r *Rebalancer) forgetReturn(ctx context.Context, cluster, stamp string) {
	var n corev1.Node
	if err := r.Client.Get(ctx, client.ObjectKey{Name: flotillav1.VirtualNodeName(cluster)}, &n); err != nil ||
		n.Annotations[flotillav1.AnnotationBackSince] != stamp {
		return
	}
	patch := client.MergeFromWithOptions(n.DeepCopy(), client.MergeFromWithOptimisticLock{})
	delete(n.Annotations, flotillav1.AnnotationBackSince)
	if err := r.Client.Patch(ctx, &n, patch); err != nil {
		r.Log.Info("The finished return stays marked on the virtual node: a later leader looks at it again", "cluster", cluster, "reason", err.Error())
	}
}

// evict evicts a pod through the Eviction API: a PodDisruptionBudget that allows no disruption
// now answers 429, and the pod is tried again at a later round.
func (r *Rebalancer) evict(ctx context.Context, m *placement.Move) error {
	// Only the incarnation planned (a UID precondition): a pod of that name made since is not moved.
	err := r.Client.SubResource("eviction").Create(ctx, m.Pod, &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: m.Pod.Namespace, Name: m.Pod.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &m.Pod.UID}}})
	switch {
	case apierrors.IsTooManyRequests(err):
		return fmt.Errorf("its PodDisruptionBudget allows no disruption now: %w", err)
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil // gone, or another incarnation now
	case err != nil:
		return fmt.Errorf("evicting %s/%s: %w", m.Pod.Namespace, m.Pod.Name, err)
	}
	r.Log.Info("Rebalancing", "pod", client.ObjectKeyFromObject(m.Pod), "from", m.From, "to", m.To)
	if r.Recorder != nil {
		r.Recorder.Eventf(m.Pod, nil, corev1.EventTypeNormal, flotillav1.ReasonRebalanced, "Evict",
			"Evicted so that its controller's pods return to cluster %s, back from a failover (from %s)", m.To, m.From)
	}
	return nil
}
