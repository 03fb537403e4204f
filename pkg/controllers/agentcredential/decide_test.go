package agentcredential

import (
	"strings"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/internal/satoken"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	token := func(issued, life time.Duration, bound string) satoken.Claims {
		return satoken.Claims{IssuedAt: now.Add(issued), Expires: now.Add(issued + life), BoundSecret: bound}
	}
	for name, tc := range map[string]struct {
		presented, written satoken.Claims
		rotate             bool
		why                string
		after              time.Duration
	}{
		"bootstrap":                 {presented: token(-time.Minute, time.Hour, "flotilla-agent-bootstrap-eu"), rotate: true, why: "bootstrap"},
		"another cluster's binding": {presented: token(-time.Minute, time.Hour, "flotilla-agent-bootstrap-us"), after: 29 * time.Minute},
		"bootstrap, already replaced": {presented: token(-time.Minute, time.Hour, "flotilla-agent-bootstrap-eu"),
			written: token(-30*time.Second, 24*time.Hour, ""), after: 12*time.Hour - 30*time.Second},
		"fresh":                {presented: token(-time.Hour, 24*time.Hour, ""), after: 11 * time.Hour},
		"past half":            {presented: token(-13*time.Hour, 24*time.Hour, ""), rotate: true, why: "past 50% of its life"},
		"past half, rewritten": {presented: token(-13*time.Hour, 24*time.Hour, ""), written: token(-time.Minute, 24*time.Hour, ""), after: 12*time.Hour - time.Minute},
		"written before the presented one": {presented: token(-time.Hour, 24*time.Hour, ""), written: token(-2*time.Hour, 24*time.Hour, ""),
			after: 11 * time.Hour},
		"no expiry": {presented: satoken.Claims{IssuedAt: now.Add(-time.Hour)}, rotate: true, why: "does not say when it expires"},
	} {
		t.Run(name, func(t *testing.T) {
			d := decide(now, "eu", tc.presented, tc.written, 0.5)
			if d.rotate != tc.rotate || !strings.Contains(d.why, tc.why) || d.after != tc.after {
				t.Errorf("decide = %+v, want rotate %v (%q) or after %s", d, tc.rotate, tc.why, tc.after)
			}
		})
	}
}
