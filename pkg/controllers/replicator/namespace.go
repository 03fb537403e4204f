package replicator

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/replication"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// NamespaceAllowed says whether a Replicator may write into an existing namespace: one it created
// (its flotilla.dev/created-by, createdBy), one that opts in (flotilla.dev/replication-allowed=true,
// set by whoever may label it), or, in a secondary, one Flotilla created there for this primary (a
// mirror of the primary's namespace of that name, which the check in the primary governs). Any
// other namespace that merely exists (argocd, a tenant's) is not the Replicator's to write: its
// author may have rights there, the namespace's owner has not agreed to be replicated into.
func NamespaceAllowed(ns *corev1.Namespace, createdByValue, primaryID string, primary bool) bool {
	switch {
	case ns.Annotations[flotillav1.AnnotationCreatedBy] == createdByValue:
		return true
	case ns.Labels[flotillav1.LabelReplicationAllowed] == "true":
		return true
	case !primary && clusters.CreatedByFlotilla(ns, primaryID):
		return true
	}
	return false
}

// NamespaceNotAllowedError says why a Replicator writes nothing into an existing namespace.
type NamespaceNotAllowedError struct{ Namespace, Cluster string }

func (e *NamespaceNotAllowedError) Error() string {
	return fmt.Sprintf("namespace %s exists in %s and was not created by this Replicator: nothing is written there until it is labelled %s=true (by someone who may label it)",
		e.Namespace, e.Cluster, flotillav1.LabelReplicationAllowed)
}

// gate checks, before anything is written anywhere, the primary's replication namespace
// (checkNamespace) and takes its Pod Security labels for the namespaces in secondaries.
func (r *Reconciler) gate(ctx context.Context, in *replication.Inputs) error {
	ns, err := checkNamespace(ctx, r.Live, *in, PrimaryName, true)
	if err != nil {
		return err
	}
	if ns != nil {
		in.PodSecurityLabels = translate.PodSecurityLabels(ns.Labels)
	}
	return nil
}

// checkNamespace reads the replication namespace in one cluster and says whether the Replicator
// may write there: nil when it is missing (the Replicator creates it) or allowed.
func checkNamespace(ctx context.Context, read client.Reader, in replication.Inputs, cluster string, primary bool) (*corev1.Namespace, error) {
	name := in.Replicator.Spec.ReplicationNamespace
	var ns corev1.Namespace
	err := read.Get(ctx, client.ObjectKey{Name: name}, &ns)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading namespace %s in %s: %w", name, cluster, err)
	case !primary && ns.Labels[flotillav1.LabelManagedBy] != in.PrimaryID:
		// Not this primary's at all: EnsureManagedNamespace says so (NamespaceNotManaged).
		return &ns, nil
	case !NamespaceAllowed(&ns, createdBy(in), in.PrimaryID, primary):
		return &ns, &NamespaceNotAllowedError{Namespace: name, Cluster: cluster}
	}
	return &ns, nil
}

// ServiceAccountOf is the ServiceAccount the pods of a workload run as ("" when the object has
// no pod template, or names none: the namespace's default one).
func ServiceAccountOf(u *unstructured.Unstructured) string {
	kind, ok := flotillav1.ReplicatedKindOf(u.GetKind())
	if !ok || kind.PodSpec == nil {
		return ""
	}
	path := slices.Clip(kind.PodSpec)
	name, _, _ := unstructured.NestedString(u.Object, append(path, "serviceAccountName")...)
	if name == "" {
		// The deprecated alias, which the API server still honours when the other is empty.
		name, _, _ = unstructured.NestedString(u.Object, append(path, "serviceAccount")...)
	}
	return name
}

// ServiceAccountProblem says why a workload may not be applied in a secondary, "" when it may: its
// pods would run as a ServiceAccount of that cluster's own (its token and RBAC are that cluster's,
// not the Replicator author's). The rule is the delegates': a ServiceAccount is usable when it is
// the namespace's default one, Flotilla's there (labelled with this primary's ID: the Replicator's
// own, or a dependency copy), one the Replicator applies in this pass (carried), or when an admin
// of that cluster labelled the namespace flotilla.dev/allow-existing-serviceaccounts=true. live
// is the ServiceAccount there (nil when missing).
func ServiceAccountProblem(name string, live *corev1.ServiceAccount, carried, namespaceAllows bool, primaryID string) string {
	switch {
	case name == "" || name == "default" || namespaceAllows:
		return ""
	case live != nil && live.Labels[flotillav1.LabelPrimary] == primaryID:
		return ""
	case live == nil && carried:
		return ""
	case live == nil:
		return fmt.Sprintf("its pods would run as ServiceAccount %s, which is not there: carry it in resources (or an admin of that cluster labels the namespace %s=true)",
			name, flotillav1.LabelAllowExistingServiceAccounts)
	}
	return fmt.Sprintf("its pods would run as ServiceAccount %s/%s, which exists there and is not Flotilla's: it may only if an admin of that cluster labels the namespace %s=true",
		live.Namespace, name, flotillav1.LabelAllowExistingServiceAccounts)
}

// serviceAccountAllowed applies ServiceAccountProblem to one object in a secondary (the primary's
// ServiceAccounts are its author's, whose rights the webhook checked): an error when it may not
// be applied there, with a Warning Event saying why.
func (r *Reconciler) serviceAccountAllowed(ctx context.Context, read client.Reader, in replication.Inputs, at replication.Place, o *unstructured.Unstructured, objs []*unstructured.Unstructured) error {
	if at.Primary {
		return nil
	}
	problem, err := serviceAccountProblem(ctx, read, in, o, objs)
	if err != nil || problem == "" {
		return err
	}
	r.event(in.Replicator, corev1.EventTypeWarning, flotillav1.ReasonServiceAccountNotManaged, "Apply", "In %s, %s %s: %s", at.Cluster, o.GetKind(), o.GetName(), problem)
	return errors.New(problem)
}

// serviceAccountProblem reads what ServiceAccountProblem needs in one secondary.
func serviceAccountProblem(ctx context.Context, read client.Reader, in replication.Inputs, o *unstructured.Unstructured, objs []*unstructured.Unstructured) (string, error) {
	name := ServiceAccountOf(o)
	if name == "" || name == "default" {
		return "", nil
	}
	carried := false
	for _, d := range objs {
		carried = carried || (d.GetKind() == "ServiceAccount" && d.GetName() == name)
	}
	nsName := in.Replicator.Spec.ReplicationNamespace
	var ns corev1.Namespace
	if err := read.Get(ctx, client.ObjectKey{Name: nsName}, &ns); err != nil {
		return "", fmt.Errorf("reading namespace %s: %w", nsName, err)
	}
	var sa corev1.ServiceAccount
	live := &sa
	err := read.Get(ctx, client.ObjectKey{Namespace: nsName, Name: name}, &sa)
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return "", fmt.Errorf("reading ServiceAccount %s/%s: %w", nsName, name, err)
	}
	return ServiceAccountProblem(name, live, carried, ns.Labels[flotillav1.LabelAllowExistingServiceAccounts] == "true", in.PrimaryID), nil
}
