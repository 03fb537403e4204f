package setup

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/seal"
)

// ensureSealKey reads the admission seal's key from the Secret flotilla-system/<name>, creating it when missing. Every
// replica calls it at start; the first to create the Secret wins and the others read its key.
func ensureSealKey(ctx context.Context, c client.Client, name string) (seal.Key, error) {
	objKey := client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: name}
	var secret corev1.Secret
	err := c.Get(ctx, objKey, &secret)
	if err == nil {
		k := seal.Key(secret.Data[seal.SecretDataKey])
		if len(k) < seal.KeySize {
			return nil, fmt.Errorf("the admission seal Secret %s/%s holds no key of %d bytes: delete it and restart the manager to make a new one", objKey.Namespace, objKey.Name, seal.KeySize)
		}
		return k, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading the admission seal key: %w", err)
	}
	k, err := seal.NewKey()
	if err != nil {
		return nil, err
	}
	immutable := true
	secret = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: objKey.Namespace, Name: objKey.Name,
		Labels: map[string]string{"app.kubernetes.io/part-of": "flotilla"}},
		Immutable: &immutable, Data: map[string][]byte{seal.SecretDataKey: k}}
	if err := c.Create(ctx, &secret); err != nil {
		if apierrors.IsAlreadyExists(err) { // another replica won: use its key
			return ensureSealKey(ctx, c, name)
		}
		return nil, fmt.Errorf("storing the admission seal key: %w", err)
	}
	return k, nil
}
