// Package tunnel carries the manager's connections to a secondary whose API server the primary
// cannot dial: an agent in the secondary dials out to the manager's tunnel endpoint, proves which
// cluster it serves, and then carries, over that one TLS connection multiplexed into streams
// (yamux), every connection the manager opens to that secondary's API server.
//
// The agent only forwards bytes. The manager's TLS session to the API server runs end to end
// inside a stream, verified against the CA the registration holds for that cluster, with the same
// least-privilege identity as in push mode; the agent can neither read nor forge what it carries.
// So a pulled secondary is, to the rest of the manager, a cluster whose rest.Config dials through
// Server.Dialer instead of the network: informers, probes, logs and exec work unchanged, and while
// no agent is connected a dial fails at once and the cluster is unreachable exactly as a silent
// push-mode secondary is.
//
// # Implementation considerations
//
//   - The handshake is one line from the agent, FLOTILLA-TUNNEL/1 then a JSON hello (the cluster
//     it claims and its credential), of at most hello.MaxBytes (package hello, the framing), and one line back (OK or ERR with
//     the reason). It is read under a deadline: a client that sends nothing or too much costs one
//     short-lived goroutine, and the server handshakes at most Options.MaxHandshakes at once,
//     closing further connections at once rather than queueing them.
//   - The credential decides the cluster: Options.Authenticate maps it to the one cluster it
//     belongs to (TokenReviewer: the primary's ServiceAccount flotilla-agent-<cluster>), and a
//     hello claiming another is refused and logged with the name it claimed.
//   - One session per cluster: a newer one (the agent restarted) replaces the older, which is
//     closed. Sessions are independent, and yamux's per-stream windows keep one slow stream from
//     stalling another.
//   - Keepalives (Options.KeepAlive) find a half-open connection; the agent reconnects with
//     exponential backoff and jitter.
package tunnel
