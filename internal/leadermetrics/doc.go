// Package leadermetrics serves a Prometheus collector only while the process leads: metrics
// computed from the manager's cache at each scrape (proxies per phase, Replicators synced) come
// from the one replica whose cache the controllers act on, and a standby serves none of them.
package leadermetrics
