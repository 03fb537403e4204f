package clusters

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/internal/satoken"
)

// TokenRenewer stores a renewed token for a context of the registration kubeconfig (it rewrites
// the Secret in the primary).
type TokenRenewer func(ctx context.Context, context, token string) error

// TokenExpiry returns when a JWT bearer token expires, or nil when the token has no expiry (or is
// not a JWT, or is empty).
func TokenExpiry(tok string) (*time.Time, error) {
	if tok == "" {
		return nil, nil
	}
	c, err := satoken.Parse(tok)
	if err != nil || c.Expires.IsZero() {
		return nil, err
	}
	t := c.Expires
	return &t, nil
}

// renewalTimeout bounds one token renewal, so a cluster that hangs never holds a renewal forever.
const renewalTimeout = 15 * time.Second

// maybeRenewToken starts a renewal when none is running. It never blocks the probe loop: a hung
// cluster must still be seen as hung.
func (c *cluster) maybeRenewToken(ctx context.Context, log logr.Logger) {
	if !c.registry.isLeader() || c.identityChanged() || !c.renewing.CompareAndSwap(false, true) {
		return // a token is renewed only through the cluster it was minted in
	}
	go func() {
		defer c.renewing.Store(false)
		rctx, cancel := context.WithTimeout(ctx, renewalTimeout)
		defer cancel()
		c.renewToken(rctx, log)
	}()
}

// renewToken renews a service account token at RenewalFraction (half) of its lifetime through the
// TokenRequest API of the cluster itself, and hands the new token to the registry's TokenRenewer.
func (c *cluster) renewToken(ctx context.Context, log logr.Logger) {
	renew := c.registry.opts.TokenRenewer
	tok := c.currentToken()
	if renew == nil || tok == "" {
		return
	}
	claims, err := satoken.Parse(tok)
	if err != nil {
		return
	}
	if at := claims.RenewAt(c.registry.opts.RenewalFraction); at.IsZero() || c.registry.opts.Clock.Now().Before(at) {
		return
	}
	ns, name, ok := claims.ServiceAccount()
	if !ok {
		return
	}
	seconds := int64(claims.Expires.Sub(claims.IssuedAt).Seconds())
	tr, err := c.client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
	}, metav1.CreateOptions{})
	if err != nil {
		log.Error(err, "Renewing the service account token failed", "serviceAccount", ns+"/"+name)
		tokenRenewals.WithLabelValues(c.name, "error").Inc()
		return
	}
	if err := renew(ctx, c.entry.Context, tr.Status.Token); err != nil {
		log.Error(err, "Storing the renewed token failed", "serviceAccount", ns+"/"+name)
		return
	}
	c.setToken(tr.Status.Token)
	tokenRenewals.WithLabelValues(c.name, "renewed").Inc()
	log.Info("Renewed the service account token", "serviceAccount", ns+"/"+name, "expires", tr.Status.ExpirationTimestamp.Time)
	c.registry.notify(c.name)
}
