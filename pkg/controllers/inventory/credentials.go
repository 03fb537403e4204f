package inventory

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/pkg/access"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// FieldManager is the field manager of what the inventory writes.
const FieldManager = "flotilla-inventory"

// publishCredentials keeps, in a consumer namespace, the Secret each secondary's access provider
// reads (named as its ClusterProfile, key token): a token of the readers' own account there when
// the secondary's admin gave them one at join (--consumer-role), else the joined identity's
// current token, renewed as the manager renews it. A secondary nothing outside the manager can
// reach gets none; the Secrets of clusters no longer registered, or no longer reachable so, are
// deleted. A Secret is written only when its token changed since this manager last wrote it.
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
		token, identity := a.Token, IdentityJoined
		if t, ok := r.consumerToken(ctx, s.Name, a.Token); ok {
			token, identity = t, IdentityConsumer
		}
		sum := fmt.Sprintf("%x", sha256.Sum256([]byte(token)))
		key := namespace + "/" + name
		if last, ok := r.credentials.Load(key); ok && last == sum {
			continue
		}
		secret := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels,
				Annotations: map[string]string{"flotilla.dev/cluster": s.Name, AnnotationIdentity: identity}},
			Type: corev1.SecretTypeOpaque, Data: map[string][]byte{SecretTokenKey: []byte(token)}}
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

// AnnotationIdentity says on a credential Secret whose token it holds: IdentityConsumer (the
// readers' own account in the secondary) or IdentityJoined (Flotilla's identity there).
const (
	AnnotationIdentity = "flotilla.dev/identity"
	IdentityConsumer   = "consumer"
	IdentityJoined     = "joined"
)

// consumerTokenLifetime is how long a readers' token minted by the manager lasts; it is minted
// again past half of it (at the pass after), so a reader always holds one valid for a while.
const consumerTokenLifetime = time.Hour

// consumerToken is a token of the readers' account in a secondary (access.Names.Consumer), minted
// through the joined identity, which may mint that account's tokens and no other's; false when
// the secondary has no such account (its admin gave the readers none), the identity may not mint
// it (a join before --consumer-role), or the secondary does not answer now. A token is kept until
// half its life. A secondary without the account is not asked again until it is joined again
// (only join gives the readers an account, and it mints the identity a new token: joined changes).
func (r *Reconciler) consumerToken(ctx context.Context, cluster, joined string) (string, bool) {
	now := r.Clock.Now()
	joinedSum := fmt.Sprintf("%x", sha256.Sum256([]byte(joined)))
	if v, ok := r.consumerTokens.Load(cluster); ok {
		if t := v.(mintedToken); t.joined == joinedSum && (t.token == "" || now.Before(t.renewAt)) {
			return t.token, t.token != ""
		}
	}
	sec, ok := r.Registry.Secondary(cluster)
	if !ok || !sec.Running {
		return "", false
	}
	seconds := int64(consumerTokenLifetime.Seconds())
	names := access.NamesFor(r.Registry.PrimaryID())
	tr, err := sec.Clientset.CoreV1().ServiceAccounts(flotillav1.SystemNamespace).CreateToken(ctx, names.Consumer,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		// No account for the readers there: looked for again once the cluster is joined again.
		r.consumerTokens.Store(cluster, mintedToken{joined: joinedSum})
		return "", false
	case err != nil:
		ctrl.LoggerFrom(ctx).V(1).Info("Minting the inventory readers' token failed", "cluster", cluster, "error", err.Error())
		return "", false
	}
	life := tr.Status.ExpirationTimestamp.Sub(now)
	r.consumerTokens.Store(cluster, mintedToken{token: tr.Status.Token, renewAt: now.Add(life / 2), joined: joinedSum})
	return tr.Status.Token, true
}

// mintedToken is a readers' token and when to mint the next (an empty token: none to mint), and
// the hash of the joined identity's token it was looked for with.
type mintedToken struct {
	token, joined string
	renewAt       time.Time
}
