package clusters

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReadableKinds are the namespaced kinds Flotilla's identity may list in a secondary, and so
// what it reads before it deletes a namespace it created there (a Secret of a secondary is never
// read: a known limit, said in docs/replicator.md and docs/election.md).
func ReadableKinds() []client.ObjectList {
	return []client.ObjectList{&corev1.PodList{}, &corev1.ConfigMapList{}, &corev1.ServiceList{}, &corev1.ServiceAccountList{},
		&corev1.PersistentVolumeClaimList{}, &appsv1.DeploymentList{}, &appsv1.StatefulSetList{}, &appsv1.DaemonSetList{},
		&batchv1.JobList{}, &batchv1.CronJobList{}, &networkingv1.IngressList{}}
}

// HoldsForeign names the first object of the namespace, of the kinds listed, that is not ours:
// neither on its way out, nor one every namespace gets from the cluster itself (ClusterOwn), nor
// one ours accepts. "" when there is none.
func HoldsForeign(ctx context.Context, read client.Reader, namespace string, kinds []client.ObjectList, ours func(client.Object) bool) (string, error) {
	foreign, _, err := Contents(ctx, read, namespace, kinds, ours)
	return foreign, err
}

// Contents says what a namespace holds of the kinds listed, objects on their way out and the
// cluster's own (ClusterOwn) aside: the first object that is not ours ("" when there is none; the
// listing stops there) and whether any of ours is there.
func Contents(ctx context.Context, read client.Reader, namespace string, kinds []client.ObjectList, ours func(client.Object) bool) (foreign string, holdsOurs bool, err error) {
	for _, l := range kinds {
		if err := read.List(ctx, l, client.InNamespace(namespace)); err != nil {
			return "", false, fmt.Errorf("listing in %s: %w", namespace, err)
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return "", false, fmt.Errorf("reading a list in %s: %w", namespace, err)
		}
		for _, it := range items {
			m, ok := it.(client.Object)
			switch {
			case !ok || m.GetDeletionTimestamp() != nil || ClusterOwn(m):
			case ours(m):
				holdsOurs = true
			default:
				return fmt.Sprintf("%T %s", m, m.GetName()), holdsOurs, nil
			}
		}
	}
	return "", holdsOurs, nil
}

// ClusterOwn says whether an object is one every namespace gets from the cluster itself.
func ClusterOwn(o client.Object) bool {
	switch v := o.(type) {
	case *corev1.ConfigMap:
		return v.Name == "kube-root-ca.crt"
	case *corev1.ServiceAccount:
		return v.Name == "default"
	case *corev1.Secret:
		return v.Type == corev1.SecretTypeServiceAccountToken && v.Annotations[corev1.ServiceAccountNameKey] == "default"
	}
	return false
}
