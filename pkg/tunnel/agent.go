package tunnel

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/yamux"

	"github.com/flotilla-dev/flotilla/pkg/tunnel/hello"
)

// AgentOptions configure an Agent.
type AgentOptions struct {
	// Cluster is the cluster's name in the primary, which the agent claims.
	Cluster string
	// Address is the manager's tunnel endpoint (host:port).
	Address string
	// TLS verifies the endpoint (RootCAs, ServerName); the agent presents no certificate.
	TLS *tls.Config
	// Token returns the agent's current credential; it is asked at every connection, so a
	// rotated one is used from the next.
	Token func(ctx context.Context) (string, error)
	// Upstream is the address the agent forwards every stream to: its cluster's API server.
	Upstream string
	// Dial dials the endpoint and the upstream (a net.Dialer's when nil).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// MinBackoff and MaxBackoff bound the wait between connections (1 s and 30 s when zero); each
	// wait is drawn between half and all of the current bound, which doubles after each failure.
	MinBackoff, MaxBackoff time.Duration
	// DialTimeout bounds one dial and handshake (10 s when zero).
	DialTimeout time.Duration
	// KeepAlive is how often the agent pings the endpoint over an open session (5 s when zero);
	// a ping unanswered within it ends the session, and the agent connects again.
	KeepAlive time.Duration
}

func (o *AgentOptions) defaults() {
	if o.MinBackoff == 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = 5 * time.Second
	}
	if o.Dial == nil {
		d := &net.Dialer{}
		o.Dial = d.DialContext
	}
}

// AgentStatus is what an agent knows of its tunnel.
type AgentStatus struct {
	Connected bool
	Since     time.Time
	Connects  int
	LastError string
}

// Agent holds a cluster's tunnel to the manager: it connects, serves the streams the manager
// opens by forwarding each to Upstream, and connects again with backoff when the session ends.
type Agent struct {
	opts AgentOptions
	log  logr.Logger

	mu     sync.Mutex
	status AgentStatus
}

// NewAgent returns an agent; Run runs it.
func NewAgent(opts AgentOptions, log logr.Logger) *Agent {
	opts.defaults()
	return &Agent{opts: opts, log: log}
}

// Status returns what the agent knows of its tunnel.
func (a *Agent) Status() AgentStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status
}

// Run holds the tunnel until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	bound := a.opts.MinBackoff
	for ctx.Err() == nil {
		served, err := a.session(ctx)
		if ctx.Err() != nil {
			break
		}
		a.mu.Lock()
		a.status.Connected, a.status.Since, a.status.LastError = false, time.Now(), err.Error()
		a.mu.Unlock()
		var refused *hello.RefusedError
		if errors.As(err, &refused) {
			a.log.Error(err, "the tunnel endpoint refused this agent", "cluster", a.opts.Cluster)
		} else {
			a.log.Info("tunnel down", "cluster", a.opts.Cluster, "reason", err.Error())
		}
		if served {
			bound = a.opts.MinBackoff
		}
		wait := bound/2 + rand.N(bound/2+1) //nolint:gosec // jitter, not a secret
		bound = min(2*bound, a.opts.MaxBackoff)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return nil
}

// session connects once and serves until the session ends; served says whether it got as far as
// an open session (then the backoff starts again from its least).
func (a *Agent) session(ctx context.Context) (served bool, err error) {
	y, err := a.connect(ctx)
	if err != nil {
		return false, err
	}
	a.mu.Lock()
	a.status.Connected, a.status.Since = true, time.Now()
	a.status.Connects++
	a.mu.Unlock()
	a.log.Info("tunnel up", "cluster", a.opts.Cluster, "endpoint", a.opts.Address)
	go func() {
		<-ctx.Done()
		_ = y.Close()
	}()
	for {
		stream, err := y.Accept()
		if err != nil {
			_ = y.Close()
			return true, fmt.Errorf("the session ended: %w", err)
		}
		go a.forward(ctx, stream)
	}
}

// connect dials the endpoint, handshakes and returns the session the manager opens streams on.
func (a *Agent) connect(ctx context.Context) (*yamux.Session, error) {
	dctx, cancel := context.WithTimeout(ctx, a.opts.DialTimeout)
	defer cancel()
	token, err := a.opts.Token(dctx)
	if err != nil {
		return nil, fmt.Errorf("reading the agent's credential: %w", err)
	}
	raw, err := a.opts.Dial(dctx, "tcp", a.opts.Address)
	if err != nil {
		return nil, fmt.Errorf("dialling the tunnel endpoint %s: %w", a.opts.Address, err)
	}
	conn := tls.Client(raw, a.tlsConfig())
	if deadline, ok := dctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	fail := func(err error) (*yamux.Session, error) {
		_ = conn.Close()
		return nil, err
	}
	if err := conn.HandshakeContext(dctx); err != nil {
		return fail(fmt.Errorf("TLS with the tunnel endpoint %s: %w", a.opts.Address, err))
	}
	if err := hello.Write(conn, hello.Hello{Cluster: a.opts.Cluster, Token: token}); err != nil {
		return fail(err)
	}
	br := bufio.NewReaderSize(conn, 4096)
	if err := hello.ReadReply(br); err != nil {
		return fail(err)
	}
	if br.Buffered() > 0 {
		return fail(fmt.Errorf("%w: the endpoint sent data before the session", hello.ErrMalformed))
	}
	_ = conn.SetDeadline(time.Time{})
	cfg := yamux.DefaultConfig()
	// The agent pings too: it mostly waits for streams, so without a ping of its own it learns that
	// the endpoint dropped a session (its close lost while the network was cut) only when the
	// endpoint's close is retransmitted to it, which took 46 s after a 10 s cut once.
	cfg.EnableKeepAlive = true
	cfg.KeepAliveInterval = a.opts.KeepAlive
	cfg.ConnectionWriteTimeout = a.opts.KeepAlive
	cfg.LogOutput = io.Discard
	y, err := yamux.Server(conn, cfg)
	if err != nil {
		return fail(err)
	}
	return y, nil
}

// tlsConfig is the configured one, naming the endpoint's host as the server to verify when it
// names none (as tls.Dial does).
func (a *Agent) tlsConfig() *tls.Config {
	cfg := a.opts.TLS.Clone()
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(a.opts.Address); err == nil {
			cfg.ServerName = host
		}
	}
	return cfg
}

// forward pipes one stream to a new connection to the upstream, both ways, until either side ends.
func (a *Agent) forward(ctx context.Context, stream net.Conn) {
	dctx, cancel := context.WithTimeout(ctx, a.opts.DialTimeout)
	up, err := a.opts.Dial(dctx, "tcp", a.opts.Upstream)
	cancel()
	if err != nil {
		a.log.Info("cannot reach the API server for a tunnelled connection", "upstream", a.opts.Upstream, "error", err.Error())
		_ = stream.Close()
		return
	}
	pipe(stream, up)
}

// pipe copies both ways and closes both connections once either direction ends.
func pipe(a, b net.Conn) {
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			_ = a.Close()
			_ = b.Close()
		})
	}
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(a, b)
		closeBoth()
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(b, a)
		closeBoth()
		done <- struct{}{}
	}()
	<-done
	<-done
}
