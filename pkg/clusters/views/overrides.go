package views

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
