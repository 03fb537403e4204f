package override

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// Reconciler writes the Applied condition of Overrides (Cluster false) or ClusterOverrides.
type Reconciler struct {
	Client  client.Client
	Cluster bool
}

// Reconcile judges one object at its generation, with one status patch.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj, status := r.newObject()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if status.ObservedGeneration == obj.GetGeneration() {
		return ctrl.Result{}, nil // judged at this generation; failures said since stay
	}
	base := obj.DeepCopyObject().(client.Object)
	judged := Judge(specOf(obj), obj.GetGeneration())
	// A failure said at this generation already (a proxy or Replicator was faster) stays.
	if said := meta.FindStatusCondition(status.Conditions, flotillav1.ConditionApplied); said == nil ||
		said.ObservedGeneration != obj.GetGeneration() || judged.Status == metav1.ConditionFalse {
		meta.SetStatusCondition(&status.Conditions, judged)
	}
	status.ObservedGeneration = obj.GetGeneration()
	if err := r.Client.Status().Patch(ctx, obj, client.MergeFrom(base)); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(fmt.Errorf("patching the status of %s: %w", req.NamespacedName, err))
	}
	return ctrl.Result{}, nil
}

// Judge is the Applied condition of a spec at a generation, before any object is tried: False
// when a selector does not parse. Pure.
func Judge(spec flotillav1.OverrideSpec, generation int64) metav1.Condition {
	for i, rule := range spec.Rules {
		sels := []*metav1.LabelSelector{rule.Clusters.Selector}
		for _, t := range rule.Targets {
			sels = append(sels, t.Selector)
		}
		for _, sel := range sels {
			if sel == nil {
				continue
			}
			if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
				name := rule.Name
				if name == "" {
					name = fmt.Sprintf("#%d", i+1)
				}
				return metav1.Condition{Type: flotillav1.ConditionApplied, Status: metav1.ConditionFalse, Reason: flotillav1.ReasonSelectorInvalid,
					ObservedGeneration: generation, Message: fmt.Sprintf("Rule %s: a selector does not parse, it matches nothing: %v", name, err)}
			}
		}
	}
	return metav1.Condition{Type: flotillav1.ConditionApplied, Status: metav1.ConditionTrue, Reason: flotillav1.ReasonRulesValid,
		ObservedGeneration: generation, Message: fmt.Sprintf("%d rule(s); none has failed an object at this generation", len(spec.Rules))}
}

func (r *Reconciler) newObject() (client.Object, *flotillav1.OverrideStatus) {
	if r.Cluster {
		o := &flotillav1.ClusterOverride{}
		return o, &o.Status
	}
	o := &flotillav1.Override{}
	return o, &o.Status
}

func specOf(obj client.Object) flotillav1.OverrideSpec {
	if o, ok := obj.(*flotillav1.Override); ok {
		return o.Spec
	}
	return obj.(*flotillav1.ClusterOverride).Spec
}

// SetupWithManager watches its kind's spec changes.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, options controller.Options) error {
	obj, _ := r.newObject()
	name := "override"
	if r.Cluster {
		name = "clusteroverride"
	}
	return ctrl.NewControllerManagedBy(mgr).Named(name).
		For(obj, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(options).Complete(r)
}
