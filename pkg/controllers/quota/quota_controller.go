package quota

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/seal"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// waitingRecheck is how often a namespace with proxies waiting for quota is looked at again
// besides its pods' and quotas' events (a missed event never leaves a pod waiting for good).
const waitingRecheck = 30 * time.Second

// Reconciler admits a namespace's proxies to its FleetQuotas. A request names the namespace.
type Reconciler struct {
	// Client reads the quotas and proxies from the manager's cache and writes both.
	Client client.Client
	// Live reads the proxy being admitted from the API server: the cache keeps no affinity.
	Live client.Reader
	// SealKey seals a proxy anew once admitted: its quota annotation and clusters changed.
	SealKey  seal.Key
	Recorder events.EventRecorder

	mu sync.Mutex
	// admitted are, per namespace, the proxies this controller admitted that the cache has not
	// shown admitted yet, with the cluster they were admitted to: counted, so that a pass that
	// reads the cache before the last one's writes reach it never admits past the limit.
	admitted map[string]map[types.UID]string
}

// Reconcile is one pass over one namespace: count, admit what fits, say why the rest waits,
// write each quota's status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ns := req.Name
	var quotas flotillav1.FleetQuotaList
	if err := r.Client.List(ctx, &quotas, client.InNamespace(ns)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the FleetQuotas of %s: %w", ns, err)
	}
	var proxies corev1.PodList
	if err := r.Client.List(ctx, &proxies, client.InNamespace(ns), client.MatchingLabels{flotillav1.LabelProxy: "true"}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the proxies of %s: %w", ns, err)
	}
	var claims corev1.PersistentVolumeClaimList
	if err := r.Client.List(ctx, &claims, client.InNamespace(ns)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the claims of %s: %w", ns, err)
	}
	in := gather(quotas.Items, proxies.Items, claims.Items, r.pending(ns, proxies.Items))
	verdicts, _ := placement.AdmitToQuotas(in.quotas, in.used, in.requests())
	var errs []error
	waitingFor := map[string]int32{}
	admittedAny := false
	for i, p := range in.waiting {
		v := verdicts[i]
		if !v.Admit {
			for _, q := range in.quotas {
				if strings.Contains(v.Why, "FleetQuota "+q.Name+" ") || strings.Contains(v.Why, "FleetQuota "+q.Name+":") {
					waitingFor[q.Name]++
				}
			}
			errs = append(errs, r.wait(ctx, p, v.Why))
			continue
		}
		admitted, err := r.admit(ctx, p, v.Cluster)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if admitted {
			r.remember(ns, p.UID, v.Cluster, p)
			admittedAny = true
		}
	}
	// The status counts what is admitted now, this pass's admissions included (counted anew from
	// the same lists: a claim two of them share counts once).
	now := in
	if admittedAny {
		now = gather(quotas.Items, proxies.Items, claims.Items, r.pending(ns, proxies.Items))
	}
	for i := range quotas.Items {
		errs = append(errs, r.writeStatus(ctx, &quotas.Items[i], now.used, waitingFor[quotas.Items[i].Name]))
	}
	if err := errors.Join(errs...); err != nil {
		return ctrl.Result{}, err
	}
	if len(in.waiting) > 0 {
		return ctrl.Result{RequeueAfter: waitingRecheck}, nil
	}
	return ctrl.Result{}, nil
}

// pending are the namespace's admissions the cache has not shown yet; those it shows (admitted,
// or gone) are forgotten.
func (r *Reconciler) pending(ns string, proxies []corev1.Pod) map[types.UID]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	mine := r.admitted[ns]
	if len(mine) == 0 {
		return nil
	}
	seen := map[types.UID]bool{}
	for i := range proxies {
		p := &proxies[i]
		if _, ok := mine[p.UID]; ok && p.Annotations[flotillav1.AnnotationQuota] != flotillav1.QuotaWaiting {
			delete(mine, p.UID) // the cache shows it admitted: counted from the pod itself
		}
		seen[p.UID] = true
	}
	out := map[types.UID]string{}
	for uid, c := range mine {
		if !seen[uid] {
			delete(mine, uid) // gone
			continue
		}
		out[uid] = c
	}
	return out
}

func (r *Reconciler) remember(ns string, uid types.UID, cluster string, p *corev1.Pod) {
	if cluster == "" {
		cluster = clusterOf(p)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.admitted == nil {
		r.admitted = map[string]map[types.UID]string{}
	}
	if r.admitted[ns] == nil {
		r.admitted[ns] = map[types.UID]string{}
	}
	r.admitted[ns][uid] = cluster
}

// admit lets a proxy through its quota gate, in one update of the live pod on the version read:
// the gate removed, annotated admitted, narrowed to cluster when the quotas limit clusters (an
// expression added to its required node affinity, as Kubernetes lets a gated pod's be), and
// sealed anew. Only a proxy whose seal verifies is touched; false when there was nothing to admit.
func (r *Reconciler) admit(ctx context.Context, cached *corev1.Pod, cluster string) (bool, error) {
	if seal.Verify(r.SealKey, cached) != nil {
		return false, nil // not the webhook's: the proxy reconciler says so, and runs nothing
	}
	// The live pod: the cache keeps no affinity, which the update must keep.
	var live corev1.Pod
	if err := r.Live.Get(ctx, client.ObjectKeyFromObject(cached), &live); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if live.UID != cached.UID || live.Annotations[flotillav1.AnnotationQuota] != flotillav1.QuotaWaiting || seal.Verify(r.SealKey, &live) != nil {
		return false, nil
	}
	base := live.DeepCopy()
	live.Spec.SchedulingGates = slices.DeleteFunc(live.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
		return g.Name == flotillav1.SchedulingGateQuota
	})
	live.Annotations[flotillav1.AnnotationQuota] = flotillav1.QuotaAdmitted
	delete(live.Annotations, flotillav1.AnnotationQuotaExceeded)
	if cluster != "" {
		narrow(&live, cluster)
	}
	live.Annotations[flotillav1.AnnotationSeal] = seal.Stamp(r.SealKey, &live)
	if err := r.Client.Patch(ctx, &live, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, client.IgnoreNotFound(fmt.Errorf("admitting proxy %s/%s to its FleetQuota: %w", live.Namespace, live.Name, err))
	}
	where := ""
	if cluster != "" {
		where = " in cluster " + cluster
	}
	r.event(cached, corev1.EventTypeNormal, flotillav1.ReasonQuotaAdmitted, "Admit", "Its FleetQuotas have room for it%s", where)
	return true, nil
}

// narrow keeps a proxy's required node affinity to one cluster: an expression added to each term
// (or the one term, when it had none).
func narrow(p *corev1.Pod, cluster string) {
	only := corev1.NodeSelectorRequirement{Key: flotillav1.LabelCluster, Operator: corev1.NodeSelectorOpIn, Values: []string{cluster}}
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		p.Spec.Affinity.NodeAffinity = translate.ClusterAffinity([]string{cluster}).NodeAffinity
		return
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchExpressions = append(terms[i].MatchExpressions, only)
	}
}

// wait says on a proxy why it waits for quota (AnnotationQuotaExceeded, and an Event), when that
// changed.
func (r *Reconciler) wait(ctx context.Context, p *corev1.Pod, why string) error {
	if p.Annotations[flotillav1.AnnotationQuotaExceeded] == why {
		return nil
	}
	base := p.DeepCopy()
	p.Annotations[flotillav1.AnnotationQuotaExceeded] = why
	if err := r.Client.Patch(ctx, p, client.MergeFrom(base)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("saying why proxy %s/%s waits for quota: %w", p.Namespace, p.Name, err))
	}
	r.event(p, corev1.EventTypeWarning, flotillav1.ReasonQuotaExceeded, "Wait", "Waiting for quota: %s", why)
	return nil
}

func (r *Reconciler) event(p *corev1.Pod, kind, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(p, nil, kind, reason, action, format, args...)
	}
}
