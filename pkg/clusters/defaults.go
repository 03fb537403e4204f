package clusters

import "time"

// Defaults of Options when zero; the manager's flags (--probe-interval, --probe-timeout,
// --token-renewal-fraction) default to them too.
const (
	// DefaultProbeInterval is Options.ProbeInterval when zero.
	DefaultProbeInterval = 2 * time.Second
	// DefaultProbeTimeout is Options.ProbeTimeout when zero.
	DefaultProbeTimeout = 2 * time.Second
	// DefaultRenewalFraction is Options.RenewalFraction when zero or out of (0, 1).
	DefaultRenewalFraction = 0.5
)
