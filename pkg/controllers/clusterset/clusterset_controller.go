package clusterset

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters/views"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

// Views are the clusters as placement judges them (the gatherer's views, virtual node labels
// included).
type Views interface {
	Views(ctx context.Context) ([]placement.ClusterView, error)
}

// Reconciler writes a ClusterSet's status from the clusters placement sees.
type Reconciler struct {
	Client client.Client
	Views  Views
}

// Reconcile resolves one ClusterSet, with one status patch at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	set := &flotillav1.ClusterSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, set); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	base := set.DeepCopy()
	defer func() {
		if err := r.Client.Status().Patch(ctx, set, client.MergeFrom(base)); err != nil && retErr == nil {
			retErr = client.IgnoreNotFound(fmt.Errorf("patching the status of ClusterSet %s: %w", set.Name, err))
		}
	}()
	all, err := r.Views.Views(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	setStatus(set, all)
	return ctrl.Result{}, nil
}

// setStatus is the set's status over the clusters registered now: its members, and Resolved
// False while its selector does not parse or a cluster it names is not registered.
func setStatus(set *flotillav1.ClusterSet, all []placement.ClusterView) {
	members := views.SetView(set).Members(all)
	sort.Strings(members)
	set.Status.Clusters = members
	set.Status.ObservedGeneration = set.Generation
	cond := metav1.Condition{Type: flotillav1.ConditionResolved, Status: metav1.ConditionTrue, Reason: flotillav1.ReasonResolved,
		Message: fmt.Sprintf("%d cluster(s) in the set", len(members)), ObservedGeneration: set.Generation}
	var unknown []string
	for _, c := range set.Spec.Clusters {
		if !slices.ContainsFunc(all, func(v placement.ClusterView) bool { return v.Name == c }) {
			unknown = append(unknown, c)
		}
	}
	sort.Strings(unknown)
	if set.Spec.Selector != nil {
		if _, err := metav1.LabelSelectorAsSelector(set.Spec.Selector); err != nil {
			cond.Status, cond.Reason = metav1.ConditionFalse, flotillav1.ReasonSelectorInvalid
			cond.Message = fmt.Sprintf("spec.selector selects no cluster: %v", err)
		}
	}
	if len(unknown) > 0 && cond.Status == metav1.ConditionTrue {
		cond.Status, cond.Reason = metav1.ConditionFalse, flotillav1.ReasonUnknownClusters
		cond.Message = fmt.Sprintf("%d cluster(s) in the set; not registered (or not a usable secondary): %s", len(members), strings.Join(unknown, ", "))
	}
	meta.SetStatusCondition(&set.Status.Conditions, cond)
}
