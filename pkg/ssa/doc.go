// Package ssa writes with server-side apply between Flotilla's own writers: dependency
// reflection and the Replicator each apply under their own field manager, and neither takes an
// object over from the other. "One owner per copy" is then proved by the API server's field
// ownership, which works where Flotilla may not read (Secrets in a secondary).
package ssa
