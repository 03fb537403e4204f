// Package seal owns the admission seal: a keyed MAC that Flotilla's webhook stamps on every proxy
// it makes, and that the proxy reconciler verifies before it creates a delegate. A proxy carries
// state that decides what runs in a secondary (its label, its delegate constraints, its cluster
// choice); the admission policy makes the webhook run on every pod that carries it, and the seal
// proves, to the one component that acts on it, that the webhook computed it, even where the
// policy or the webhook's configuration is missing. The key is a Secret only the manager reads.
//
// The MAC covers what the webhook decided and what stays fixed after admission: the pod's
// namespace, its name (or generateName), its controller, its flotilla.dev/* labels and
// annotations, and the clusters its required node affinity allows (named in clear in the seal, as
// the proxy cache drops the affinity). What the webhook judged in the
// spec (volumes, claims, scheduler) is immutable and is checked again by the reconciler itself.
//
// The MAC (Key, NewKey, Stamp, Verify, AllowedClusters) needs no cluster and belongs to the pure
// core; Ensure, which reads or creates the key's Secret through a client, is the one part that
// does I/O (an exemption in .golangci.yml until it moves up, to the manager's wiring).
package seal
