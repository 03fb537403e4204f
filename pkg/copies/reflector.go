package copies

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// Reflector copies dependencies from the primary (read with Primary) to a secondary.
type Reflector struct {
	// Primary reads the referenced objects in the primary (uncached gets).
	Primary   client.Reader
	PrimaryID string
}

// Missing is a required dependency that does not exist in the primary, or that Flotilla never
// copies (Why says which): the delegate waits for it.
type Missing struct{ Kind, Name, Why string }

func (m *Missing) Error() string {
	if m.Why != "" {
		return fmt.Sprintf("%s %s, %s", m.Kind, m.Name, m.Why)
	}
	return fmt.Sprintf("%s %s does not exist", m.Kind, m.Name)
}

// ForeignServiceAccount is a ServiceAccount of the secondary that Flotilla did not create: a
// delegate may not run as it (its token and RBAC are that cluster's, not the tenant's) unless the
// secondary's namespace opts in with label flotilla.dev/allow-existing-serviceaccounts=true.
type ForeignServiceAccount struct{ Namespace, Name string }

func (f *ForeignServiceAccount) Error() string {
	return fmt.Sprintf("ServiceAccount %s/%s exists there and is not Flotilla's; a delegate may run as it only if an admin of that cluster labels the namespace %s=true",
		f.Namespace, f.Name, flotillav1.LabelAllowExistingServiceAccounts)
}

// Ensure copies the dependencies of pod into the secondary reached by sec, before its delegate is
// created, and returns what it copied: the delegate keeps only references to those
// (translate.KeepCopied), so that no reference resolves to an object of the secondary's own. It
// returns a *Missing for a required reference that does not exist in the primary or is never
// copied, a *ForeignServiceAccount for a ServiceAccount of the secondary's own. The kinds are
// those of translate.DependencyKinds the pod references, in the table's order; the kinds that
// select the pod follow it afterwards (the dependency sync).
func (r *Reflector) Ensure(ctx context.Context, sec client.Client, pod *corev1.Pod, owner metav1.OwnerReference) (translate.Copied, error) {
	copied := translate.Copied{ConfigMaps: map[string]bool{}, Secrets: map[string]bool{}}
	for _, kind := range translate.DependencyKinds {
		if kind.Use != translate.UseReference {
			continue
		}
		for _, ref := range kind.References(pod) {
			var ok bool
			var err error
			if kind.Read == translate.ReadNothing {
				err = r.ensureServiceAccount(ctx, sec, kind, pod.Namespace, ref.Name, owner)
			} else {
				ok, err = r.copyReferenced(ctx, sec, kind, pod.Namespace, ref, owner)
			}
			if err != nil {
				return copied, err
			}
			if ok {
				copied.Add(kind.Kind, ref.Name)
			}
		}
	}
	return copied, nil
}

// copyReferenced reads one referenced object in the primary and applies its copy; false when an
// optional one is not there or never copied (the delegate drops the reference).
func (r *Reflector) copyReferenced(ctx context.Context, sec client.Client, kind translate.DependencyKind, namespace string, ref translate.Ref, owner metav1.OwnerReference) (bool, error) {
	var src client.Object = kind.New()
	if err := r.Primary.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, src); err != nil {
		if apierrors.IsNotFound(err) {
			if ref.Optional {
				return false, nil
			}
			return false, &Missing{Kind: kind.Kind, Name: ref.Name}
		}
		return false, fmt.Errorf("reading %s %s/%s: %w", kind.Kind, namespace, ref.Name, err)
	}
	if kind.NotCopied != nil {
		if why := kind.NotCopied(src); why != "" {
			if ref.Optional {
				return false, nil
			}
			return false, &Missing{Kind: kind.Kind, Name: ref.Name, Why: why}
		}
	}
	// A copy a Replicator holds there satisfies the dependency: Apply yields to it.
	if _, err := Apply(ctx, sec, kind.Copy(src, r.PrimaryID, owner)); err != nil {
		return false, err
	}
	return true, nil
}

// ensureServiceAccount creates the ServiceAccount the delegate runs as (the kind made from its
// name alone: nothing of the primary's is read). One that already exists there must be this
// primary's copy, else a *ForeignServiceAccount (unless the namespace opts in).
func (r *Reflector) ensureServiceAccount(ctx context.Context, sec client.Client, kind translate.DependencyKind, namespace, name string, owner metav1.OwnerReference) error {
	src := kind.New()
	src.SetNamespace(namespace)
	src.SetName(name)
	var sa client.Object = kind.Copy(src, r.PrimaryID, owner)
	err := sec.Create(ctx, sa)
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %s %s/%s: %w", kind.Kind, namespace, name, err)
	}
	var live client.Object = kind.New()
	if err := sec.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, live); err != nil {
		return fmt.Errorf("reading %s %s/%s: %w", kind.Kind, namespace, name, err)
	}
	if live.GetLabels()[flotillav1.LabelPrimary] == r.PrimaryID {
		return nil
	}
	var ns corev1.Namespace
	if err := sec.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		return fmt.Errorf("reading namespace %s: %w", namespace, err)
	}
	if ns.Labels[flotillav1.LabelAllowExistingServiceAccounts] == "true" {
		return nil
	}
	return &ForeignServiceAccount{Namespace: namespace, Name: name}
}
