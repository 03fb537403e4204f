package clusters

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// SecretReconciler feeds the registration Secret to the Registry whenever it changes.
type SecretReconciler struct {
	Client   client.Reader
	Registry *Registry
	Recorder events.EventRecorder
}

// Reconcile applies the current registration Secret. An unparsable one is reported as a Warning
// Event on the Secret (and on the primary's ClusterDetector) and otherwise ignored.
func (r *SecretReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var secret corev1.Secret
	err := r.Client.Get(ctx, req.NamespacedName, &secret)
	switch {
	case apierrors.IsNotFound(err):
		_ = r.Registry.Apply(nil)
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading the registration Secret: %w", err)
	}
	raw, ok := secret.Data[flotillav1.KubeconfigSecretKey]
	if !ok {
		raw = nil
	}
	if err := r.Registry.Apply(raw); err != nil && r.Recorder != nil {
		r.Recorder.Eventf(&secret, nil, corev1.EventTypeWarning, flotillav1.ReasonKubeconfigUnparsable, "Register",
			"Registration kubeconfig not applied, the last good one stays in force: %s", err.Error())
	}
	return ctrl.Result{}, nil
}

// SetupWithManager watches the registration Secret only.
func (r *SecretReconciler) SetupWithManager(mgr ctrl.Manager) error {
	isRegistration := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == flotillav1.SystemNamespace && o.GetName() == flotillav1.KubeconfigSecretName
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("registration").
		For(&corev1.Secret{}, builder.WithPredicates(isRegistration)).
		Complete(r)
}

// SecretTokenRenewer returns a TokenRenewer that writes renewed tokens into the registration Secret
// (the user entry of the given context), retrying on conflicts.
func SecretTokenRenewer(c client.Client) TokenRenewer {
	return func(ctx context.Context, contextName, token string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var secret corev1.Secret
			key := client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: flotillav1.KubeconfigSecretName}
			if err := c.Get(ctx, key, &secret); err != nil {
				return fmt.Errorf("reading the registration Secret: %w", err)
			}
			cfg, err := clientcmd.Load(secret.Data[flotillav1.KubeconfigSecretKey])
			if err != nil {
				return fmt.Errorf("parsing the registration kubeconfig: %w", err)
			}
			kctx, ok := cfg.Contexts[contextName]
			if !ok || cfg.AuthInfos[kctx.AuthInfo] == nil {
				return fmt.Errorf("context %q is no longer registered", contextName)
			}
			cfg.AuthInfos[kctx.AuthInfo].Token = token
			raw, err := clientcmd.Write(*cfg)
			if err != nil {
				return fmt.Errorf("writing the registration kubeconfig: %w", err)
			}
			secret.Data[flotillav1.KubeconfigSecretKey] = raw
			return c.Update(ctx, &secret)
		})
	}
}
