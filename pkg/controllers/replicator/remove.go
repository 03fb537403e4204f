package replicator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/ssa"
)

// reconcileDelete removes what the Replicator applied in every cluster it knows of, then its
// namespaces where it created them, then lets it go. A cluster that does not answer keeps the
// finalizer (its cleanup finishes when it returns); a cluster removed from Flotilla is skipped.
func (r *Reconciler) reconcileDelete(ctx context.Context, rep *flotillav1.Replicator) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(rep, flotillav1.FinalizerReplicator) {
		return ctrl.Result{}, nil
	}
	// Every cluster it may have written to, those its namespace may no longer use included.
	written := map[string]bool{PrimaryName: true}
	for _, c := range rep.Status.Clusters {
		written[c.Name] = true
	}
	for _, name := range clusters.Resolve(rep.Spec.TargetCluster, r.Registry.Snapshots()).Clusters {
		written[name] = true
	}
	var pending []string
	for name := range written {
		acc, ok := r.accessTo(name)
		if !ok {
			if r.registered(name) {
				pending = append(pending, name+": not answering")
			}
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, r.Timeout)
		err := r.cleanCluster(cctx, acc, rep, name)
		cancel()
		if err != nil {
			pending = append(pending, fmt.Sprintf("%s: %v", name, err))
		}
	}
	if len(pending) > 0 {
		base := rep.DeepCopy()
		meta.SetStatusCondition(&rep.Status.Conditions, metav1.Condition{Type: flotillav1.ConditionSynced, Status: metav1.ConditionFalse,
			Reason: flotillav1.ReasonCleanupPending, Message: fmt.Sprintf("Removing what was applied; waiting for %v", pending)})
		if err := r.Client.Status().Patch(ctx, rep, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("saying the cleanup of Replicator %s waits: %w", rep.Name, err)
		}
		return ctrl.Result{RequeueAfter: r.retry()}, nil
	}
	if err := r.deleteCA(ctx, rep); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.deleteIssuedSecrets(ctx, rep); err != nil {
		return ctrl.Result{}, err
	}
	base := rep.DeepCopy()
	controllerutil.RemoveFinalizer(rep, flotillav1.FinalizerReplicator)
	return ctrl.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, rep, client.MergeFrom(base)))
}

// registered says whether a cluster is still registered (known to the registry at all).
func (r *Reconciler) registered(name string) bool {
	for _, s := range r.Registry.Snapshots() {
		if s.Name == name {
			return true
		}
	}
	return false
}

// cleanCluster deletes the Replicator's objects in one cluster, then its namespace if allowed.
func (r *Reconciler) cleanCluster(ctx context.Context, acc access, rep *flotillav1.Replicator, cluster string) error {
	var errs []error
	for _, a := range rep.Status.Applied {
		if a.Cluster == cluster {
			errs = append(errs, deleteApplied(ctx, acc, rep, a))
		}
	}
	r.applied.ForgetPrefix(appliedPrefix(rep, cluster))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return r.deleteNamespace(ctx, acc, rep)
}

// deleteNamespace deletes the replication namespace only if this Replicator created it, no other
// Replicator uses it, and it holds nothing that is not Flotilla's (no pod but a ReplicaSet's or a
// delegate, no ConfigMap or Service without Flotilla's labels): a namespace that existed before is kept.
func (r *Reconciler) deleteNamespace(ctx context.Context, acc access, rep *flotillav1.Replicator) error {
	name := rep.Spec.ReplicationNamespace
	var ns corev1.Namespace
	if err := acc.read.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ns.Annotations[flotillav1.AnnotationCreatedBy] != r.Registry.PrimaryID()+"/"+string(rep.UID) || !ns.DeletionTimestamp.IsZero() {
		return nil
	}
	var others flotillav1.ReplicatorList
	if err := r.Client.List(ctx, &others); err != nil {
		return fmt.Errorf("listing Replicators: %w", err)
	}
	for _, o := range others.Items {
		if o.UID != rep.UID && o.Spec.ReplicationNamespace == name {
			return nil
		}
	}
	foreign, err := holdsForeign(ctx, acc.read, rep, acc.primary)
	if err != nil {
		return err
	}
	if foreign != "" {
		r.event(rep, corev1.EventTypeNormal, flotillav1.ReasonNamespaceKept, "Delete",
			"Namespace %s is kept: it holds %s, which is not this Replicator's", name, foreign)
		return nil
	}
	if err := acc.w.Delete(ctx, &ns, client.Preconditions{UID: &ns.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting namespace %s: %w", name, err)
	}
	return nil
}

// holdsForeign says whether a namespace holds anything that is not this Replicator's: a
// delegate aside (it goes with its proxy), every pod, ConfigMap, Service, ServiceAccount,
// PersistentVolumeClaim, workload (scaled to zero or not), Ingress, and in the primary every
// Secret, must carry its label or be on its way out; the pods of its own Deployment (ReplicaSet
// <deployment>-<hash>) are its. Only then is the namespace deleted with it. Secrets of a secondary
// cannot be listed (Flotilla never reads Secrets there): a known limit, said in docs/replicator.md.
func holdsForeign(ctx context.Context, read client.Reader, rep *flotillav1.Replicator, primary bool) (string, error) {
	kinds := clusters.ReadableKinds()
	if primary {
		kinds = append(kinds, &corev1.SecretList{})
	}
	plain, err := plainKindsListed(ctx, read, rep)
	if err != nil {
		return "", err
	}
	kinds = append(kinds, plain...)
	return clusters.HoldsForeign(ctx, read, rep.Spec.ReplicationNamespace, kinds, func(o client.Object) bool {
		if p, ok := o.(*corev1.Pod); ok {
			return p.Labels[flotillav1.LabelPrimary] != "" || ofDeployment(p, rep.Spec.DeploymentName) ||
				p.Labels[flotillav1.LabelReplicator] == flotillav1.ReplicatorLabelValue(rep.Name)
		}
		return o.GetLabels()[flotillav1.LabelReplicator] == flotillav1.ReplicatorLabelValue(rep.Name) || (primary && isIssued(o, rep))
	})
}

// plainKindsListed are lists of the kinds of the Replicator's resources that are not of
// ReplicatedKinds, those the cluster serves and lets Flotilla list: a user's custom resource in
// the namespace keeps it too. A kind it does not serve holds nothing; one it may not list there
// Flotilla could not have written either.
func plainKindsListed(ctx context.Context, read client.Reader, rep *flotillav1.Replicator) ([]client.ObjectList, error) {
	var out []client.ObjectList
	seen := map[schema.GroupVersionKind]bool{}
	for _, m := range rep.Spec.Resources {
		gvk := schema.FromAPIVersionAndKind(m.APIVersion, m.Kind)
		if _, special := flotillav1.SpecialKind(gvk.GroupKind()); special || seen[gvk] {
			continue
		}
		seen[gvk] = true
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		err := read.List(ctx, l, client.InNamespace(rep.Spec.ReplicationNamespace), client.Limit(1))
		switch {
		case meta.IsNoMatchError(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("listing %s in %s: %w", gvk.Kind, rep.Spec.ReplicationNamespace, err)
		}
		l = &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		out = append(out, l)
	}
	return out, nil
}

// ofDeployment says whether a pod belongs to the named Deployment: its ReplicaSet is
// <deployment>-<pod-template-hash>.
func ofDeployment(p *corev1.Pod, deployment string) bool {
	ref := metav1.GetControllerOf(p)
	if deployment == "" || ref == nil || ref.Kind != "ReplicaSet" {
		return false
	}
	hash, ok := strings.CutPrefix(ref.Name, deployment+"-")
	return ok && hash != "" && hash == p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
}

// isIssued says whether an object is a Secret cert-manager issued for the Replicator.
func isIssued(o client.Object, rep *flotillav1.Replicator) bool {
	if _, ok := o.(*corev1.Secret); !ok {
		return false
	}
	for _, n := range issuedSecretNames(rep) {
		if o.GetName() == n {
			return true
		}
	}
	return false
}

// prune deletes what this Replicator applied before and no longer wants: objects dropped from
// its spec, and everything in clusters no longer targeted. Nothing is deleted in a cluster whose
// pass stopped early (what it applied there stays listed, so it is known later); a cluster no
// longer targeted whose cleanup fails stays in the status until it succeeds. It returns the
// results to add for those clusters.
func (r *Reconciler) prune(ctx context.Context, rep *flotillav1.Replicator, results []placeResult, targets []string) []placeResult {
	wanted, complete := map[string]bool{}, map[string]bool{}
	for i := range results {
		pr := &results[i]
		complete[pr.sync.Name] = len(pr.applied) > 0 || pr.sync.Synced
		for _, a := range pr.applied {
			wanted[a.Cluster+"/"+a.Kind+"/"+a.Name] = true
		}
		if !complete[pr.sync.Name] {
			pr.applied = remembered(rep, pr.sync.Name, pr.sync.Message)
		}
	}
	targeted := map[string]bool{PrimaryName: true}
	for _, t := range targets {
		targeted[t] = true
	}
	for _, a := range rep.Status.Applied {
		if !targeted[a.Cluster] || !complete[a.Cluster] || wanted[a.Cluster+"/"+a.Kind+"/"+a.Name] {
			continue
		}
		if acc, ok := r.accessTo(a.Cluster); ok {
			cctx, cancel := context.WithTimeout(ctx, r.Timeout)
			err := deleteApplied(cctx, acc, rep, a)
			cancel()
			r.applied.Forget(appliedKey(rep, a.Cluster, groupKindOf(a), a.Name))
			if err != nil {
				// It stays listed as applied, so the next pass deletes it again.
				r.event(rep, corev1.EventTypeWarning, flotillav1.ReasonApplyFailed, "Prune",
					"Cluster %s: removing %s %s, no longer wanted, failed: %v", a.Cluster, a.Kind, a.Name, err)
				keepListed(results, a)
			}
		}
	}
	var leftovers []placeResult
	for _, c := range rep.Status.Clusters {
		if targeted[c.Name] {
			continue
		}
		err := fmt.Errorf("not answering")
		if acc, ok := r.accessTo(c.Name); ok {
			cctx, cancel := context.WithTimeout(ctx, r.Timeout)
			err = r.cleanCluster(cctx, acc, rep, c.Name)
			cancel()
		}
		if err != nil {
			msg := "no longer targeted; removing what was applied failed: " + err.Error()
			leftovers = append(leftovers, placeResult{sync: flotillav1.ClusterSync{Name: c.Name, Role: c.Role, Message: msg},
				applied: remembered(rep, c.Name, msg)})
		}
	}
	return leftovers
}

// keepListed keeps an object whose removal failed in its cluster's applied list.
func keepListed(results []placeResult, a flotillav1.AppliedResource) {
	for i := range results {
		if results[i].sync.Name == a.Cluster {
			results[i].applied = append(results[i].applied, a)
			return
		}
	}
}

// remembered is what the status says was applied in a cluster, marked not applied now.
func remembered(rep *flotillav1.Replicator, cluster, msg string) []flotillav1.AppliedResource {
	var out []flotillav1.AppliedResource
	for _, a := range rep.Status.Applied {
		if a.Cluster == cluster {
			a.ApplyStatus, a.Message = flotillav1.ApplyStatusFailed, msg
			out = append(out, a)
		}
	}
	return out
}

// access is how Flotilla writes to and reads (uncached) one cluster.
type access struct {
	w       client.Client
	read    client.Reader
	primary bool
}

// accessTo reaches a cluster named in a Replicator's status.
func (r *Reconciler) accessTo(cluster string) (access, bool) {
	if cluster == PrimaryName {
		return access{w: r.Client, read: r.Live, primary: true}, true
	}
	sec, ok := r.Registry.Secondary(cluster)
	return access{w: sec.Client, read: sec.Client}, ok
}

// deleteApplied deletes one object this Replicator applied (only if it still carries its label).
func deleteApplied(ctx context.Context, acc access, rep *flotillav1.Replicator, a flotillav1.AppliedResource) error {
	gvk, ok := appliedGVK(a)
	if !ok || a.ApplyStatus == flotillav1.ApplyStatusDependencyCopy || gvk == kindDefinition {
		// A dependency copy is reflection's to remove. A definition is never deleted: every
		// object of its kind in the cluster, the cluster's own included, would go with it.
		return nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(rep.Spec.ReplicationNamespace)
	u.SetName(a.Name)
	if readableIn(gvk.GroupKind(), a.Cluster == PrimaryName) {
		if err := acc.read.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			if meta.IsNoMatchError(err) {
				return nil // the kind is not served there any more: nothing of it is left
			}
			return client.IgnoreNotFound(err)
		}
		if u.GetLabels()[flotillav1.LabelReplicator] != flotillav1.ReplicatorLabelValue(rep.Name) || (a.Cluster != PrimaryName && ssa.Holds(u, flotillav1.FieldManagerReflection)) {
			return nil // someone else's now, or shared with reflection (which removes it when unused)
		}
	}
	// In a secondary, Secrets are never read: the admission policy lets Flotilla delete only
	// those carrying its primary label.
	if err := acc.w.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s in %s: %w", a.Kind, a.Name, a.Cluster, err)
	}
	return nil
}

// appliedGVK is the group, version and kind of what the status says was applied: its apiVersion,
// or where an older version recorded none, its kind's of ReplicatedKinds.
func appliedGVK(a flotillav1.AppliedResource) (schema.GroupVersionKind, bool) {
	if a.APIVersion != "" {
		return schema.FromAPIVersionAndKind(a.APIVersion, a.Kind), true
	}
	k, ok := flotillav1.ReplicatedKindOf(a.Kind)
	return k.GroupVersionKind(), ok
}
