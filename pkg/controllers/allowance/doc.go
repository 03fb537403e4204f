// Package allowance is the lender: it runs in a secondary (flotilla-manager lender, the chart's
// role secondary) and holds each primary to the PrimaryAllowance its admin wrote there. The
// secondary's own API server does the holding: a ResourceQuota in every namespace the primary
// manages, whose hard limits add up to no more than the allowance. The lender only moves room
// between those quotas (Split, pure), lowering first and raising only into room that no quota's
// spec, counted limit or usage still holds, so the sum never passes the allowance even while the
// API server's quota controller lags. It labels a namespace flotilla.dev/allowance=<primary> once
// its quota is in force; the primary's fence admits no workload in a namespace without it.
package allowance
