package main

import (
	"fmt"
	"slices"
	"strings"
)

// Target is one figure of the report against its target: met when Measured <= Limit.
type Target struct {
	Name     string  `json:"name"`
	Measured float64 `json:"measured"`
	Limit    float64 `json:"limit"`
	Met      bool    `json:"met"`
}

func newTarget(name string, measured, limit float64) Target {
	return Target{Name: name, Measured: measured, Limit: limit, Met: measured <= limit}
}

// workTargets are the work per elected pod against what it needs at least, per phase, from the
// leader's own requests (flotilla_api_requests_total) and its proxy reconciles. Creating: in the
// primary one status write (Running, with Delegated and the IP), no read of a pod, at most one
// Event; in the secondary the delegate's create and nothing else. Deleting: one delete of the
// delegate, one finalizer removal and the proxy's delete at grace 0 (a kubelet's), no read.
func workTargets(create, remove APICalls) []Target {
	c, d := create.ByResource, remove.ByResource
	return []Target{
		newTarget("creating: status writes to the primary", c["primary patch pods/status"], 1),
		newTarget("creating: reads of pods in the primary", c["primary get pods"], 0),
		newTarget("creating: Events into the primary", c["primary create events"]+c["primary patch events"], 1),
		newTarget("creating: delegate creates in the secondary", c["secondary create pods"], 1),
		newTarget("creating: other requests to the secondary", others(c, "secondary ", "secondary create pods"), 0.05),
		newTarget("creating: proxy reconciles", create.ProxyReconciles, 2),
		newTarget("deleting: delegate deletes in the secondary", d["secondary delete pods"], 1),
		newTarget("deleting: finalizer removals in the primary", d["primary patch pods"], 1),
		newTarget("deleting: proxy deletes (grace 0) in the primary", d["primary delete pods"], 1),
		newTarget("deleting: reads of pods", d["primary get pods"]+d["secondary get pods"], 0),
		newTarget("deleting: proxy reconciles", remove.ProxyReconciles, 2),
	}
}

// others sums the requests of one API server other than the ones named, and other than the
// health probes and discovery (paths outside the resource API, "(readyz)"): those come with time,
// not with pods.
func others(by map[string]float64, prefix string, except ...string) float64 {
	var n float64
	for k, v := range by {
		if strings.HasPrefix(k, prefix) && !slices.Contains(except, k) && !strings.Contains(k, " (") {
			n += v
		}
	}
	return round(n)
}

// printTargets prints each target, met or not, with its figure.
func printTargets(ts []Target) {
	if len(ts) == 0 {
		return
	}
	fmt.Println("\ntargets per elected pod (work from the leader's requests, flotilla_api_requests_total):")
	for _, t := range ts {
		met := "met"
		if !t.Met {
			met = "not met"
		}
		fmt.Printf("  %-52s %6.2f (target <= %g): %s\n", t.Name, t.Measured, t.Limit, met)
	}
}

// costTargets are the webhook's cost and the leader's memory against their targets: one
// admission as the primary's API server times it within twice the manager's handler time; at
// 10,000 elected pods, the leader's resident peak within 300 MiB and its live heap within 15 KiB
// per elected pod (below that scale the fixed part of the heap weighs on each pod).
func costTargets(r Report) []Target {
	var out []Target
	if c := r.CreateCalls; c.WebhookHandlerMillis > 0 {
		out = append(out, newTarget("webhook call over its handler's time (API server's view)", round(c.WebhookMillis/c.WebhookHandlerMillis), 2))
	}
	if r.Pods >= 10000 {
		out = append(out, newTarget("leader's resident peak, MiB", r.ManagerPeakMiB, 300),
			newTarget("leader's live heap per elected pod, KiB", r.HeapKiBPerPod, 15))
	}
	return out
}
