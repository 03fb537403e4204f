package dependency

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/ssa"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// Reflector copies dependencies from the primary (read with Primary) to a secondary.
type Reflector struct {
	// Primary reads ConfigMaps, Secrets and ServiceAccounts in the primary (uncached gets).
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

// Ensure copies the dependencies of pod into the secondary reached by sec, before its delegate is
// created, and returns what it copied: the delegate keeps only references to those
// (translate.KeepCopied), so that no reference resolves to an object of the secondary's own. It
// returns a *Missing for a required reference that does not exist in the primary or is never copied.
func (r *Reflector) Ensure(ctx context.Context, sec client.Client, pod *corev1.Pod, owner metav1.OwnerReference) (translate.Copied, error) {
	copied := translate.Copied{ConfigMaps: map[string]bool{}, Secrets: map[string]bool{}}
	err := r.ensure(ctx, sec, pod, owner, copied)
	return copied, err
}

func (r *Reflector) ensure(ctx context.Context, sec client.Client, pod *corev1.Pod, owner metav1.OwnerReference, copied translate.Copied) error {
	cms, secrets := translate.Dependencies(pod)
	for _, ref := range cms {
		var src corev1.ConfigMap
		if err := r.Primary.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, &src); err != nil {
			if apierrors.IsNotFound(err) {
				if ref.Optional {
					continue
				}
				return &Missing{Kind: "ConfigMap", Name: ref.Name}
			}
			return fmt.Errorf("reading ConfigMap %s/%s: %w", pod.Namespace, ref.Name, err)
		}
		// A copy a Replicator holds there satisfies the dependency: apply yields to it.
		if _, err := apply(ctx, sec, translate.ConfigMapCopy(&src, r.PrimaryID, owner)); err != nil {
			return err
		}
		copied.ConfigMaps[ref.Name] = true
	}
	for _, ref := range secrets {
		var src corev1.Secret
		if err := r.Primary.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, &src); err != nil {
			if apierrors.IsNotFound(err) {
				if ref.Optional {
					continue
				}
				return &Missing{Kind: "Secret", Name: ref.Name}
			}
			return fmt.Errorf("reading Secret %s/%s: %w", pod.Namespace, ref.Name, err)
		}
		if src.Type == corev1.SecretTypeServiceAccountToken {
			// A token of the primary is never copied; the secondary's Secret of that name is not
			// the tenant's to read. Optional: the reference is dropped (KeepCopied).
			if ref.Optional {
				continue
			}
			return &Missing{Kind: "Secret", Name: ref.Name, Why: "a ServiceAccount token of the primary, which Flotilla never copies to a secondary"}
		}
		if _, err := apply(ctx, sec, translate.SecretCopy(&src, r.PrimaryID, owner)); err != nil {
			return err
		}
		copied.Secrets[ref.Name] = true
	}
	return r.ensureServiceAccount(ctx, sec, pod, owner)
}

// ForeignServiceAccount is a ServiceAccount of the secondary that Flotilla did not create: a
// delegate may not run as it (its token and RBAC are that cluster's, not the tenant's) unless the
// secondary's namespace opts in with label flotilla.dev/allow-existing-serviceaccounts=true.
type ForeignServiceAccount struct{ Namespace, Name string }

func (f *ForeignServiceAccount) Error() string {
	return fmt.Sprintf("ServiceAccount %s/%s exists there and is not Flotilla's; a delegate may run as it only if an admin of that cluster labels the namespace %s=true",
		f.Namespace, f.Name, flotillav1.LabelAllowExistingServiceAccounts)
}

// ensureServiceAccount creates a same-named ServiceAccount when the delegate runs as one; the
// default one is the secondary's own. One that already exists there must be this primary's copy,
// else a *ForeignServiceAccount (unless the namespace opts in).
func (r *Reflector) ensureServiceAccount(ctx context.Context, sec client.Client, pod *corev1.Pod, owner metav1.OwnerReference) error {
	name := pod.Spec.ServiceAccountName
	if name == "" || name == "default" {
		return nil
	}
	sa := &corev1.ServiceAccount{ObjectMeta: translate.CopyMeta(name, pod.Namespace, r.PrimaryID, owner)}
	err := sec.Create(ctx, sa)
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ServiceAccount %s/%s: %w", pod.Namespace, name, err)
	}
	var live corev1.ServiceAccount
	if err := sec.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, &live); err != nil {
		return fmt.Errorf("reading ServiceAccount %s/%s: %w", pod.Namespace, name, err)
	}
	if live.Labels[flotillav1.LabelPrimary] == r.PrimaryID {
		return nil
	}
	var ns corev1.Namespace
	if err := sec.Get(ctx, client.ObjectKey{Name: pod.Namespace}, &ns); err != nil {
		return fmt.Errorf("reading namespace %s: %w", pod.Namespace, err)
	}
	if ns.Labels[flotillav1.LabelAllowExistingServiceAccounts] == "true" {
		return nil
	}
	return &ForeignServiceAccount{Namespace: pod.Namespace, Name: name}
}

// apply writes a copy with server-side apply, as reflection's own field manager (no read first:
// Secrets may not be read there). A copy a Replicator holds is left to it (one owner per copy):
// apply then writes nothing and says so. An immutable copy whose content changed is replaced.
func apply(ctx context.Context, c client.Client, obj client.Object) (yielded bool, err error) {
	holder, err := ssa.Apply(ctx, c, obj, flotillav1.FieldManagerReflection, flotillav1.FieldManagerReplicator)
	if err != nil && apierrors.IsInvalid(err) {
		// An immutable ConfigMap or Secret cannot change: replace it. (A conflict with another
		// writer is found before validation, so this one is reflection's.)
		if derr := c.Delete(ctx, obj); derr != nil && !apierrors.IsNotFound(derr) {
			return false, fmt.Errorf("replacing immutable %s/%s: %w", obj.GetNamespace(), obj.GetName(), derr)
		}
		holder, err = ssa.Apply(ctx, c, obj, flotillav1.FieldManagerReflection, flotillav1.FieldManagerReplicator)
	}
	if err != nil {
		return false, fmt.Errorf("copying %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	return holder != "", nil
}
