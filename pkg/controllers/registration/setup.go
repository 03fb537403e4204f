package registration

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// SetupWithManager watches the registration Secret only. The controller runs on every replica,
// not only the leader: each replica's webhook and kubelet API read their own registry.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, options controller.Options) error {
	isRegistration := predicate.NewPredicateFuncs(func(o client.Object) bool {
		key := clusters.RegistrationKey()
		return o.GetNamespace() == key.Namespace && o.GetName() == key.Name
	})
	needLeader := false
	options.NeedLeaderElection = &needLeader
	// Once at start, whether the Secret exists or not: a missing Secret is a state too (no
	// clusters yet, or the known ones detached), and readiness waits for it to be read.
	atStart := source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Add(reconcile.Request{NamespacedName: clusters.RegistrationKey()})
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("registration").
		For(&corev1.Secret{}, builder.WithPredicates(isRegistration)).
		WatchesRawSource(atStart).
		WithOptions(options).
		Complete(r)
}
