package replicator

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/pki"
)

// caSecretKey is where a Replicator's CA (and its private key) lives: the primary only.
func caSecretKey(rep *flotillav1.Replicator) client.ObjectKey {
	return client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: rep.Name + "-ca"}
}

// tlsMaterial returns the data of ca-secret and cli-secret: ONE CA per Replicator for every
// cluster, kept in the primary's flotilla-system; a server certificate for every Ingress host; a
// client certificate. What is stored and still good is kept; the rest is (re)issued.
func (r *Reconciler) tlsMaterial(ctx context.Context, rep *flotillav1.Replicator) (server, cli map[string][]byte, err error) {
	ns := rep.Spec.ReplicationNamespace
	caData, err := r.secretData(ctx, caSecretKey(rep))
	if err != nil {
		return nil, nil, err
	}
	serverData, err := r.secretData(ctx, client.ObjectKey{Namespace: ns, Name: ServerSecretName})
	if err != nil {
		return nil, nil, err
	}
	clientData, err := r.secretData(ctx, client.ObjectKey{Namespace: ns, Name: ClientSecretName})
	if err != nil {
		return nil, nil, err
	}
	bundle, _, err := pki.EnsureBundle(pki.StoredFrom(caData, serverData, clientData),
		pki.BundleSpec{CACommonName: rep.Name + "-ca", ClientCommonName: rep.Name + "-client", Hosts: Hosts(rep)}, time.Now())
	if err != nil {
		return nil, nil, fmt.Errorf("TLS material of Replicator %s: %w", rep.Name, err)
	}
	if err := r.storeCA(ctx, rep, bundle.CASecretData()); err != nil {
		return nil, nil, err
	}
	return bundle.ServerSecretData(), bundle.ClientSecretData(), nil
}

// secretData reads a Secret of the primary (uncached); nil when it does not exist.
func (r *Reconciler) secretData(ctx context.Context, key client.ObjectKey) (map[string][]byte, error) {
	var s corev1.Secret
	if err := r.Live.Get(ctx, key, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	return s.Data, nil
}

// storeCA applies the CA Secret (server-side apply: a no-op when unchanged).
func (r *Reconciler) storeCA(ctx context.Context, rep *flotillav1.Replicator, data map[string][]byte) error {
	key := caSecretKey(rep)
	s := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels:      map[string]string{flotillav1.LabelReplicator: LabelValue(rep.Name)},
			Annotations: map[string]string{flotillav1.AnnotationOwner: "replicator/" + rep.Name}},
		Type: corev1.SecretTypeOpaque, Data: data}
	if err := r.Client.Patch(ctx, s, client.Apply, client.FieldOwner(flotillav1.FieldManager), client.ForceOwnership); err != nil { //nolint:staticcheck // typed apply of a core object
		return fmt.Errorf("storing the CA of Replicator %s: %w", rep.Name, err)
	}
	return nil
}

// deleteCA removes the Replicator's CA from the primary.
func (r *Reconciler) deleteCA(ctx context.Context, rep *flotillav1.Replicator) error {
	key := caSecretKey(rep)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := r.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the CA of Replicator %s: %w", rep.Name, err)
	}
	return nil
}
