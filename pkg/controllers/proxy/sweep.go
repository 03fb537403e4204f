package proxy

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/flotilla-dev/flotilla/internal/clocks"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/delegates"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

var sweptDelegates = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "flotilla_sweep_deleted_delegates_total",
	Help: "Delegates deleted by the sweep because their proxy is gone, per secondary.",
}, []string{"member_cluster"})

func init() { metrics.Registry.MustRegister(sweptDelegates) }

// maxSweepPerRound bounds the deletions of one sweep round in one secondary.
const maxSweepPerRound = 50

// Sweeper deletes delegates whose proxy is gone (or is another incarnation): the safety net for
// a finalizer removed by hand, a proxy lost while the manager was down, a reinstalled primary.
// It runs on the leader, only against a secondary that has been Running for a whole interval and
// whose delegate cache is synced, at most maxSweepPerRound deletions per round.
type Sweeper struct {
	// Proxies reads proxies (the manager's cache, synced before runnables start).
	Proxies  client.Reader
	Registry interface {
		Snapshots() []clusters.Snapshot
		Secondary(name string) (clusters.Secondary, bool)
	}
	Interval time.Duration
	Log      logr.Logger
	// Clock tells how long a secondary has been Running (default: the real one).
	Clock clock.PassiveClock
}

// NeedLeaderElection says yes: one replica deletes.
func (s *Sweeper) NeedLeaderElection() bool { return true }

// Start sweeps every Interval until ctx ends.
func (s *Sweeper) Start(ctx context.Context) error {
	wait.UntilWithContext(ctx, func(ctx context.Context) { s.sweep(ctx, s.now()) }, s.Interval)
	return nil
}

func (s *Sweeper) sweep(ctx context.Context, now time.Time) {
	for _, snap := range s.Registry.Snapshots() {
		if !snap.UsableSecondary() || snap.Status != flotillav1.ClusterRunning || now.Sub(snap.LastTransition) < s.Interval {
			continue
		}
		sec, ok := s.Registry.Secondary(snap.Name)
		if !ok {
			continue
		}
		live, synced := delegates.List(sec)
		if !synced {
			continue
		}
		deleted := 0
		for _, d := range live {
			if deleted >= maxSweepPerRound {
				break
			}
			if d.DeletionTimestamp != nil || !s.orphan(ctx, d) {
				continue
			}
			uid := d.UID
			err := sec.Client.Delete(ctx, d.DeepCopy(), &client.DeleteOptions{GracePeriodSeconds: sweepGrace(d), Preconditions: &metav1.Preconditions{UID: &uid}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				s.Log.Error(err, "Sweeping an orphaned delegate failed", "cluster", snap.Name, "pod", client.ObjectKeyFromObject(d))
				continue
			}
			deleted++
			sweptDelegates.WithLabelValues(snap.Name).Inc()
			s.Log.Info("Orphaned delegate deleted", "cluster", snap.Name, "pod", client.ObjectKeyFromObject(d))
		}
	}
}

// orphan says whether no proxy with the delegate's proxy UID exists.
func (s *Sweeper) orphan(ctx context.Context, d *corev1.Pod) bool {
	want := d.Annotations[flotillav1.AnnotationProxyUID]
	if want == "" {
		return false // not ours to judge
	}
	var proxy corev1.Pod
	err := s.Proxies.Get(ctx, client.ObjectKeyFromObject(d), &proxy)
	if apierrors.IsNotFound(err) {
		return true
	}
	return err == nil && string(proxy.UID) != want
}

func (s *Sweeper) now() time.Time { return clocks.Now(s.Clock) }

// sweepGrace is the grace period of a swept delegate: none for an at-least-once one (its proxy is
// gone, a replacement may already run, the delegate is a duplicate); its own for an at-most-once
// one, never forced (the object would go while its containers may still run).
func sweepGrace(d *corev1.Pod) *int64 {
	if translate.AtMostOnce(d) {
		return nil
	}
	zero := int64(0)
	return &zero
}
