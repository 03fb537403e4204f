package agentcredential

import (
	"fmt"
	"time"

	"github.com/flotilla-dev/flotilla/internal/satoken"
	"github.com/flotilla-dev/flotilla/pkg/tunnel"
)

// decision is whether to give a cluster's agent a new credential now, why, or when to look again.
type decision struct {
	rotate bool
	why    string
	after  time.Duration
}

// decide judges the newer of the credential the agent proved itself with (presented) and the one
// last written for it (written, zero before the first): a bootstrap credential, one that does
// not say when it expires, or one past fraction of its life is replaced.
func decide(now time.Time, cluster string, presented, written satoken.Claims, fraction float64) decision {
	current := presented
	if written.IssuedAt.After(presented.IssuedAt) {
		current = written
	}
	if current.BoundSecret == tunnel.BootstrapSecretName(cluster) {
		return decision{rotate: true, why: "the agent holds join's bootstrap credential"}
	}
	at := current.RenewAt(fraction)
	if at.IsZero() {
		return decision{rotate: true, why: "the agent's credential does not say when it expires"}
	}
	if !now.Before(at) {
		return decision{rotate: true, why: fmt.Sprintf("the agent's credential is past %.0f%% of its life (it expires %s)",
			fraction*100, current.Expires.UTC().Format(time.RFC3339))}
	}
	return decision{after: at.Sub(now)}
}
