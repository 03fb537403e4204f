package satoken

import (
	"encoding/base64"
	"testing"
	"time"
)

func jwt(payload string) string {
	return "e30." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".c2ln"
}

func TestParse(t *testing.T) {
	c, err := Parse(jwt(`{"iat":1000,"exp":4600,"sub":"system:serviceaccount:flotilla-system:flotilla-agent-eu","kubernetes.io":{"secret":{"name":"flotilla-agent-bootstrap-eu","uid":"u"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !c.IssuedAt.Equal(time.Unix(1000, 0)) || !c.Expires.Equal(time.Unix(4600, 0)) || c.BoundSecret != "flotilla-agent-bootstrap-eu" {
		t.Errorf("claims %+v", c)
	}
	if ns, name, ok := c.ServiceAccount(); !ok || ns != "flotilla-system" || name != "flotilla-agent-eu" {
		t.Errorf("ServiceAccount() = %s %s %v", ns, name, ok)
	}
	if got := c.RenewAt(0.5); !got.Equal(time.Unix(2800, 0)) {
		t.Errorf("RenewAt(0.5) = %s", got)
	}

	bare, err := Parse(jwt(`{"sub":"kubernetes-admin"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !bare.RenewAt(0.5).IsZero() || bare.BoundSecret != "" {
		t.Errorf("a token without times or binding: %+v, renew at %s", bare, bare.RenewAt(0.5))
	}
	if _, _, ok := bare.ServiceAccount(); ok {
		t.Error("kubernetes-admin is no ServiceAccount")
	}
	for _, bad := range []string{"", "a.b", "a.!!!.c", jwt(`[1]`)} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestRenewAt(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		iat, exp int64
		fraction float64
		due      bool
	}{{900, 1200, 0.5, false}, {800, 1200, 0.5, true}, {900, 1200, 0.3, true}, {0, 1200, 0.5, false}, {900, 0, 0.5, false}, {1200, 900, 0.5, false}} {
		c := Claims{}
		if tc.iat != 0 {
			c.IssuedAt = time.Unix(tc.iat, 0)
		}
		if tc.exp != 0 {
			c.Expires = time.Unix(tc.exp, 0)
		}
		at := c.RenewAt(tc.fraction)
		if due := !at.IsZero() && !now.Before(at); due != tc.due {
			t.Errorf("iat %d, exp %d, fraction %.1f: renew at %s, due %v, want %v", tc.iat, tc.exp, tc.fraction, at, due, tc.due)
		}
	}
}
