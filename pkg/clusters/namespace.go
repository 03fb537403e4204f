package clusters

import (
	"context"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// NamespaceNotManagedError is a namespace Flotilla may not use in a secondary until an admin of
// that cluster acts: one that exists there without this primary's flotilla.dev/managed-by label,
// or one the secondary refused to let it create (Refused: its answer, which names the namespace
// allow-list `flotillactl cluster join --namespaces` set there).
type NamespaceNotManagedError struct {
	Namespace, Cluster, PrimaryID string
	Refused                       error
}

func (e *NamespaceNotManagedError) Error() string {
	if e.Refused != nil {
		return fmt.Sprintf("cluster %s refused to let Flotilla create namespace %s: %v", e.Cluster, e.Namespace, e.Refused)
	}
	return fmt.Sprintf("namespace %s exists in %s without label %s=%s; an admin of %s may add it",
		e.Namespace, e.Cluster, flotillav1.LabelManagedBy, e.PrimaryID, e.Cluster)
}

func (e *NamespaceNotManagedError) Unwrap() error { return e.Refused }

// podSecurityPrefix starts the Pod Security labels of a namespace.
const podSecurityPrefix = "pod-security.kubernetes.io/"

// EnsureManagedNamespace is the one way Flotilla makes a namespace in a secondary (for a delegate
// or for a Replicator): created with this primary's managed-by and primary labels, the given
// labels (the primary namespace's Pod Security ones) and annotations when missing; an existing one
// must already carry managed-by=<primary ID>, else a *NamespaceNotManagedError, and gets the given
// labels where they differ. A creation the secondary forbids (its namespace allow-list) is a
// *NamespaceNotManagedError too, carrying the refusal. created says whether this call created it.
func EnsureManagedNamespace(ctx context.Context, c client.Client, cluster, name, primaryID string, labels, annotations map[string]string) (created bool, err error) {
	var ns corev1.Namespace
	err = c.Get(ctx, client.ObjectKey{Name: name}, &ns)
	switch {
	case apierrors.IsNotFound(err):
		ns = corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations, Labels: map[string]string{
			flotillav1.LabelManagedBy: primaryID, flotillav1.LabelPrimary: primaryID}}}
		for k, v := range labels {
			ns.Labels[k] = v
		}
		switch err := c.Create(ctx, &ns); {
		case apierrors.IsForbidden(err):
			// The secondary's fence (its namespace allow-list) or RBAC: waiting does not help.
			return false, &NamespaceNotManagedError{Namespace: name, Cluster: cluster, PrimaryID: primaryID, Refused: err}
		case err != nil && !apierrors.IsAlreadyExists(err):
			return false, fmt.Errorf("creating namespace %s in %s: %w", name, cluster, err)
		}
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading namespace %s in %s: %w", name, cluster, err)
	case ns.Labels[flotillav1.LabelManagedBy] != primaryID:
		return false, &NamespaceNotManagedError{Namespace: name, Cluster: cluster, PrimaryID: primaryID}
	}
	base := ns.DeepCopy()
	for k, v := range labels {
		if !strings.HasPrefix(k, podSecurityPrefix) && ns.Labels[k] != v {
			ns.Labels[k] = v
		}
	}
	// Pod Security: the stricter of what the namespace has (an admin of this cluster may have
	// tightened it) and what the primary's namespace asks.
	for k, v := range translate.StricterPodSecurity(ns.Labels, labels) {
		ns.Labels[k] = v
	}
	if len(ns.Labels) != len(base.Labels) || !maps.Equal(ns.Labels, base.Labels) {
		if err := c.Patch(ctx, &ns, client.MergeFrom(base)); err != nil {
			return false, fmt.Errorf("labelling namespace %s in %s: %w", name, cluster, err)
		}
	}
	return false, nil
}

// CreatedByFlotilla says whether a namespace of a secondary was created by this primary (for a
// delegate or a Replicator: EnsureManagedNamespace sets both labels), not merely opened to it by an
// admin's managed-by label.
func CreatedByFlotilla(ns *corev1.Namespace, primaryID string) bool {
	return ns.Labels[flotillav1.LabelManagedBy] == primaryID && ns.Labels[flotillav1.LabelPrimary] == primaryID
}
