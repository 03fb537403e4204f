// Package ssa owns how Flotilla's own writers share objects through server-side apply: dependency
// reflection and the Replicator each apply under their own field manager, and neither takes an
// object over from the other. It exists so that "one owner per copy" is proved by the API server's
// field ownership, which works where Flotilla may not read (Secrets in a secondary), and so that a
// resync writes only what changed (Ledger).
package ssa
