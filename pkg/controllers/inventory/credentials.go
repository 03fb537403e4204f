package inventory

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// FieldManager is the field manager of what the inventory writes.
const FieldManager = "flotilla-inventory"

// publishCredentials keeps, in a consumer namespace, the Secret each secondary's access provider
// reads (named as its ClusterProfile, key token): the joined identity's current token, renewed as
// the manager renews it. A secondary nothing outside the manager can reach gets none; the Secrets
// of clusters no longer registered, or no longer reachable so, are deleted. A Secret is written
// only when its token changed since this manager last wrote it.
func (r *Reconciler) publishCredentials(ctx context.Context, namespace string) error {
	id := r.Registry.PrimaryID()
	labels := map[string]string{LabelClusterManager: ClusterManager, flotillav1.LabelPrimary: id}
	var list corev1.SecretList
	if err := r.Live.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
		return fmt.Errorf("listing the inventory's credentials in %s: %w", namespace, err)
	}
	wanted := map[string]bool{}
	var errs []error
	for _, s := range r.Registry.Snapshots() {
		if s.Role != clusters.RoleSecondary || r.Registry.Removed(s.Name) {
			continue
		}
		a, ok := r.Registry.AccessOf(s.Name)
		if !ok {
			continue
		}
		name := ProfileName(s.Name)
		wanted[name] = true
		sum := fmt.Sprintf("%x", sha256.Sum256([]byte(a.Token)))
		key := namespace + "/" + name
		if last, ok := r.credentials.Load(key); ok && last == sum {
			continue
		}
		secret := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels,
				Annotations: map[string]string{"flotilla.dev/cluster": s.Name}},
			Type: corev1.SecretTypeOpaque, Data: map[string][]byte{SecretTokenKey: []byte(a.Token)}}
		if err := r.Client.Patch(ctx, secret, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil { //nolint:staticcheck // a typed apply of a core kind
			errs = append(errs, fmt.Errorf("writing the credential of %s in %s: %w", s.Name, namespace, err))
			continue
		}
		r.credentials.Store(key, sum)
	}
	for i := range list.Items {
		sec := &list.Items[i]
		if wanted[sec.Name] {
			continue
		}
		r.credentials.Delete(namespace + "/" + sec.Name)
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, sec, client.Preconditions{UID: &sec.UID})); err != nil {
			errs = append(errs, fmt.Errorf("deleting the credential %s/%s of a cluster no longer reached so: %w", namespace, sec.Name, err))
		}
	}
	return errors.Join(errs...)
}
