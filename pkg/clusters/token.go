package clusters

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TokenRenewer stores a renewed token for a context of the registration kubeconfig (it rewrites
// the Secret in the primary).
type TokenRenewer func(ctx context.Context, context, token string) error

// tokenClaims are the JWT claims Flotilla reads; the signature is not checked, since the token is
// only read to know when to renew it and whose it is.
type tokenClaims struct {
	Exp int64  `json:"exp"`
	Iat int64  `json:"iat"`
	Sub string `json:"sub"`
}

func parseToken(tok string) (tokenClaims, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return tokenClaims{}, errors.New("not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return tokenClaims{}, fmt.Errorf("decoding JWT payload: %w", err)
	}
	var c tokenClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return tokenClaims{}, fmt.Errorf("parsing JWT claims: %w", err)
	}
	return c, nil
}

// TokenExpiry returns when a JWT bearer token expires, or nil when the token has no expiry (or is
// not a JWT, or is empty).
func TokenExpiry(tok string) (*time.Time, error) {
	if tok == "" {
		return nil, nil
	}
	c, err := parseToken(tok)
	if err != nil || c.Exp == 0 {
		return nil, err
	}
	t := time.Unix(c.Exp, 0).UTC()
	return &t, nil
}

// renewalDue says whether a token issued at iat and expiring at exp is past fraction of its lifetime.
func renewalDue(now time.Time, iat, exp int64, fraction float64) bool {
	if exp == 0 || iat == 0 || exp <= iat {
		return false
	}
	due := iat + int64(float64(exp-iat)*fraction)
	return now.Unix() >= due
}

// serviceAccountOf returns the namespace and name of a service account token's subject.
func serviceAccountOf(sub string) (namespace, name string, ok bool) {
	parts := strings.Split(sub, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" {
		return "", "", false
	}
	return parts[2], parts[3], true
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
	claims, err := parseToken(tok)
	if err != nil || !renewalDue(c.registry.opts.Clock.Now(), claims.Iat, claims.Exp, c.registry.opts.RenewalFraction) {
		return
	}
	ns, name, ok := serviceAccountOf(claims.Sub)
	if !ok {
		return
	}
	seconds := claims.Exp - claims.Iat
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
