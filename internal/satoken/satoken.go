package satoken

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Claims are the claims of a ServiceAccount token Flotilla reads.
type Claims struct {
	// IssuedAt and Expires are zero when the token does not say.
	IssuedAt, Expires time.Time
	// Subject is system:serviceaccount:<namespace>:<name>.
	Subject string
	// BoundSecret names the Secret the token is bound to (TokenRequest's boundObjectRef): deleting
	// it ends the token. Empty when it is bound to none.
	BoundSecret string
}

// rawClaims is the JWT payload as the API server writes it.
type rawClaims struct {
	Iat  int64  `json:"iat"`
	Exp  int64  `json:"exp"`
	Sub  string `json:"sub"`
	Kube struct {
		Secret *struct {
			Name string `json:"name"`
		} `json:"secret"`
	} `json:"kubernetes.io"`
}

// Parse reads a token's claims.
func Parse(token string) (Claims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Claims{}, errors.New("not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return Claims{}, fmt.Errorf("decoding the JWT's payload: %w", err)
	}
	var raw rawClaims
	if err := json.Unmarshal(payload, &raw); err != nil {
		return Claims{}, fmt.Errorf("parsing the JWT's claims: %w", err)
	}
	c := Claims{Subject: raw.Sub}
	if raw.Iat != 0 {
		c.IssuedAt = time.Unix(raw.Iat, 0).UTC()
	}
	if raw.Exp != 0 {
		c.Expires = time.Unix(raw.Exp, 0).UTC()
	}
	if raw.Kube.Secret != nil {
		c.BoundSecret = raw.Kube.Secret.Name
	}
	return c, nil
}

// RenewAt is when a token is past fraction of its life; zero when it does not say when it was
// issued or expires.
func (c Claims) RenewAt(fraction float64) time.Time {
	if c.IssuedAt.IsZero() || c.Expires.IsZero() || !c.Expires.After(c.IssuedAt) {
		return time.Time{}
	}
	return c.IssuedAt.Add(time.Duration(float64(c.Expires.Sub(c.IssuedAt)) * fraction))
}

// ServiceAccount returns the namespace and name of the token's ServiceAccount.
func (c Claims) ServiceAccount() (namespace, name string, ok bool) {
	parts := strings.Split(c.Subject, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" {
		return "", "", false
	}
	return parts[2], parts[3], true
}
