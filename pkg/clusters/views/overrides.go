package views

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/overrides"
)

// Overrides gathers what changes a namespace's objects per cluster: every ClusterOverride and the
// namespace's Overrides (the manager's cache), as pkg/overrides applies them. Where the kinds are
// not installed (a primary installed before them), there are none.
func Overrides(ctx context.Context, r client.Reader, namespace string) ([]overrides.Source, error) {
	var out []overrides.Source
	var cos flotillav1.ClusterOverrideList
	switch err := r.List(ctx, &cos); {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("listing ClusterOverrides: %w", err)
	}
	for _, o := range cos.Items {
		if o.DeletionTimestamp.IsZero() {
			out = append(out, overrides.Source{Kind: "ClusterOverride", Name: o.Name, Spec: o.Spec})
		}
	}
	var os flotillav1.OverrideList
	if err := r.List(ctx, &os, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing the Overrides of namespace %s: %w", namespace, err)
	}
	for _, o := range os.Items {
		if o.DeletionTimestamp.IsZero() {
			out = append(out, overrides.Source{Kind: "Override", Namespace: o.Namespace, Name: o.Name, Spec: o.Spec})
		}
	}
	return out, nil
}

// OverrideCluster is what an override's cluster selector sees of a secondary: its name and its
// virtual node's labels (as a ClusterSet's selector sees them), from the manager's cache.
func OverrideCluster(ctx context.Context, r client.Reader, name string) (overrides.Cluster, error) {
	var n corev1.Node
	if err := r.Get(ctx, client.ObjectKey{Name: flotillav1.VirtualNodeName(name)}, &n); err != nil && !apierrors.IsNotFound(err) {
		return overrides.Cluster{}, fmt.Errorf("reading the virtual node of %s: %w", name, err)
	}
	labels := n.Labels
	if labels == nil {
		labels = map[string]string{flotillav1.LabelCluster: name}
	}
	return overrides.Cluster{Name: name, Labels: labels}, nil
}

// RecordOverrideFailure says on the Override or ClusterOverride of a rule that could not apply
// (condition Applied=False, reason OverrideFailed, naming the object and cluster), at its current
// generation; once said, the same failure is not written again. The override controller sets
// Applied=True again when its spec changes. Best effort: the proxy or Replicator says it too.
func RecordOverrideFailure(ctx context.Context, c client.Client, f *overrides.Failure, what, cluster string) error {
	var obj client.Object = &flotillav1.ClusterOverride{}
	if f.Namespace != "" {
		obj = &flotillav1.Override{}
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.Name}, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	status := overrideStatus(obj)
	cond := metav1.Condition{Type: flotillav1.ConditionApplied, Status: metav1.ConditionFalse, Reason: flotillav1.ReasonOverrideFailed,
		ObservedGeneration: obj.GetGeneration(), Message: fmt.Sprintf("Rule %s cannot apply to %s for cluster %s: %v", f.Rule, what, cluster, f.Err)}
	if old := meta.FindStatusCondition(status.Conditions, cond.Type); old != nil && old.Status == cond.Status &&
		old.ObservedGeneration == cond.ObservedGeneration && old.Message == cond.Message {
		return nil
	}
	base := obj.DeepCopyObject().(client.Object)
	meta.SetStatusCondition(&status.Conditions, cond)
	if err := c.Status().Patch(ctx, obj, client.MergeFrom(base)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("saying on %s that a rule cannot apply: %w", f.Source, err))
	}
	return nil
}

func overrideStatus(obj client.Object) *flotillav1.OverrideStatus {
	if o, ok := obj.(*flotillav1.Override); ok {
		return &o.Status
	}
	return &obj.(*flotillav1.ClusterOverride).Status
}
