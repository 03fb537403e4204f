package tunnel

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/yamux"

	"github.com/flotilla-dev/flotilla/internal/satoken"
	"github.com/flotilla-dev/flotilla/pkg/tunnel/hello"
)

// Options configure a Server.
type Options struct {
	// Authenticate maps an agent's token to the one cluster it belongs to, or fails.
	Authenticate func(ctx context.Context, token string) (cluster string, err error)
	// HandshakeTimeout bounds a connection's TLS handshake and hello together (5 s when zero).
	HandshakeTimeout time.Duration
	// MaxHandshakes is how many connections may be handshaking at once (64 when zero); one past
	// it is closed at once.
	MaxHandshakes int
	// KeepAlive is how often a session is pinged (10 s when zero); a ping unanswered within it
	// closes the session.
	KeepAlive time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (o *Options) defaults() {
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = 5 * time.Second
	}
	if o.MaxHandshakes == 0 {
		o.MaxHandshakes = 64
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Status is what the server knows of one cluster's tunnel.
type Status struct {
	// Connected says whether an agent's session is open.
	Connected bool
	// Since is when the current session opened, or when the last one closed.
	Since time.Time
	// RTT is the last keepalive's round trip.
	RTT time.Duration
	// Remote is the agent's address as the server sees it.
	Remote string
	// Connects counts the sessions opened since the server started; past the first, reconnects.
	Connects int
	// LastError is why the last session ended or the last hello claiming the cluster was refused.
	LastError string
	// Credential is what the current session's agent proved itself with (its token's claims, read
	// once the primary accepted it): when it expires, and the bootstrap Secret it is bound to.
	Credential satoken.Claims
}

// Server is the manager's tunnel endpoint: it accepts agents' connections, authenticates them,
// and dials secondaries' API servers through their sessions.
type Server struct {
	opts       Options
	log        logr.Logger
	handshakes chan struct{}

	mu       sync.Mutex
	sessions map[string]*session
	status   map[string]*Status
}

type session struct {
	y *yamux.Session
}

// NewServer returns a server; Serve runs it on a listener.
func NewServer(opts Options, log logr.Logger) *Server {
	opts.defaults()
	return &Server{
		opts:       opts,
		log:        log,
		handshakes: make(chan struct{}, opts.MaxHandshakes),
		sessions:   map[string]*session{},
		status:     map[string]*Status{},
	}
}

// Serve accepts agents on l (a TLS listener: tls.NewListener) until ctx ends, then closes l and
// every session.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	go func() {
		<-ctx.Done()
		_ = l.Close()
		s.closeAll()
	}()
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("accepting tunnel connections: %w", err)
		}
		select {
		case s.handshakes <- struct{}{}:
			go s.handle(ctx, conn)
		default:
			// Too many handshakes already: closing costs nothing, queueing would cost a goroutine
			// and a connection per attempt.
			_ = conn.Close()
		}
	}
}

// handle handshakes one connection and, once the agent is authenticated, keeps its session.
func (s *Server) handle(ctx context.Context, conn net.Conn) {
	cluster, cred, br, err := s.handshake(ctx, conn)
	<-s.handshakes
	if err != nil {
		s.log.V(1).Info("tunnel handshake failed", "remote", conn.RemoteAddr().String(), "error", err.Error())
		_ = conn.Close()
		return
	}
	if br.Buffered() > 0 {
		s.log.Info("tunnel agent sent data before the answer", "cluster", cluster, "remote", conn.RemoteAddr().String())
		_ = conn.Close()
		return
	}
	cfg := yamux.DefaultConfig()
	cfg.EnableKeepAlive = false // the keepalive below measures the round trip too
	cfg.ConnectionWriteTimeout = s.opts.KeepAlive
	cfg.StreamOpenTimeout = s.opts.KeepAlive
	cfg.LogOutput = io.Discard
	y, err := yamux.Client(conn, cfg)
	if err != nil {
		_ = conn.Close()
		return
	}
	sess := &session{y: y}
	s.open(cluster, cred, sess, conn.RemoteAddr().String())
	s.keepAlive(ctx, cluster, sess)
}

// handshake runs the TLS handshake and reads the hello under one deadline, and answers it.
func (s *Server) handshake(ctx context.Context, conn net.Conn) (string, satoken.Claims, *bufio.Reader, error) {
	deadline := s.opts.Now().Add(s.opts.HandshakeTimeout)
	if err := conn.SetDeadline(deadline); err != nil {
		return "", satoken.Claims{}, nil, err
	}
	hctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if tc, ok := conn.(*tls.Conn); ok {
		if err := tc.HandshakeContext(hctx); err != nil {
			return "", satoken.Claims{}, nil, fmt.Errorf("TLS handshake: %w", err)
		}
	}
	br := bufio.NewReaderSize(conn, 4096)
	h, err := hello.Read(br)
	if err != nil {
		_ = hello.WriteReply(conn, err)
		return "", satoken.Claims{}, nil, err
	}
	cluster, err := s.opts.Authenticate(hctx, h.Token)
	switch {
	case err != nil:
		err = fmt.Errorf("the credential of an agent claiming cluster %q was refused: %w", h.Cluster, err)
	case cluster != h.Cluster:
		err = fmt.Errorf("an agent of cluster %q claimed cluster %q", cluster, h.Cluster)
	}
	if err != nil {
		s.log.Info("tunnel agent refused", "claimed", h.Cluster, "remote", conn.RemoteAddr().String(), "reason", err.Error())
		s.refused(h.Cluster, err)
		_ = hello.WriteReply(conn, errors.New("not authorized for this cluster"))
		return "", satoken.Claims{}, nil, err
	}
	if err := hello.WriteReply(conn, nil); err != nil {
		return "", satoken.Claims{}, nil, err
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return "", satoken.Claims{}, nil, err
	}
	// Accepted by the primary, so its claims are the API server's: an unreadable one is only
	// a credential whose expiry is unknown here.
	cred, _ := satoken.Parse(h.Token)
	return cluster, cred, br, nil
}

// open makes sess the cluster's session, closing the one it replaces.
func (s *Server) open(cluster string, cred satoken.Claims, sess *session, remote string) {
	s.mu.Lock()
	old := s.sessions[cluster]
	s.sessions[cluster] = sess
	st := s.statusLocked(cluster)
	st.Connected, st.Since, st.Remote, st.RTT, st.Credential = true, s.opts.Now(), remote, 0, cred
	st.Connects++
	s.mu.Unlock()
	if old != nil {
		_ = old.y.Close()
	}
	s.log.Info("tunnel agent connected", "cluster", cluster, "remote", remote)
}

// keepAlive pings the session until it fails or closes, then forgets it.
func (s *Server) keepAlive(ctx context.Context, cluster string, sess *session) {
	t := time.NewTicker(s.opts.KeepAlive)
	defer t.Stop()
	var why error
	for why == nil {
		select {
		case <-ctx.Done():
			why = ctx.Err()
		case <-sess.y.CloseChan():
			why = errors.New("the session closed")
		case <-t.C:
			rtt, err := sess.y.Ping()
			if err != nil {
				why = fmt.Errorf("keepalive: %w", err)
				break
			}
			s.mu.Lock()
			if s.sessions[cluster] == sess {
				s.statusLocked(cluster).RTT = rtt
			}
			s.mu.Unlock()
		}
	}
	_ = sess.y.Close()
	s.mu.Lock()
	current := s.sessions[cluster] == sess
	if current {
		delete(s.sessions, cluster)
		st := s.statusLocked(cluster)
		st.Connected, st.Since, st.LastError = false, s.opts.Now(), why.Error()
	}
	s.mu.Unlock()
	if current {
		s.log.Info("tunnel agent disconnected", "cluster", cluster, "reason", why.Error())
	}
}

// maxRefusedNames bounds how many cluster names the server remembers a refusal for without ever
// having had their session: a stranger may claim any name, and each would otherwise cost an entry.
const maxRefusedNames = 1024

func (s *Server) refused(cluster string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, known := s.status[cluster]; !known && len(s.status) >= maxRefusedNames {
		return
	}
	s.statusLocked(cluster).LastError = err.Error()
}

func (s *Server) statusLocked(cluster string) *Status {
	st, ok := s.status[cluster]
	if !ok {
		st = &Status{}
		s.status[cluster] = st
	}
	return st
}

func (s *Server) closeAll() {
	s.mu.Lock()
	sessions := s.sessions
	s.sessions = map[string]*session{}
	s.mu.Unlock()
	for _, sess := range sessions {
		_ = sess.y.Close()
	}
}

// Status returns what the server knows of a cluster's tunnel.
func (s *Server) Status(cluster string) Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.status[cluster]; ok {
		return *st
	}
	return Status{}
}

// ErrNoTunnel is a dial to a cluster whose agent is not connected.
var ErrNoTunnel = errors.New("no tunnel")

// Dialer returns a dial function for the cluster's rest.Config (its Dial field): each connection
// is a new stream of the cluster's session, whatever the address (the agent dials its own API
// server). With no session it fails at once, as a dial to a stopped secondary does.
func (s *Server) Dialer(cluster string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		s.mu.Lock()
		sess := s.sessions[cluster]
		s.mu.Unlock()
		if sess == nil {
			return nil, fmt.Errorf("%w: cluster %s's agent is not connected", ErrNoTunnel, cluster)
		}
		type result struct {
			c   net.Conn
			err error
		}
		done := make(chan result, 1)
		go func() {
			c, err := sess.y.Open()
			done <- result{c, err}
		}()
		select {
		case r := <-done:
			if r.err != nil {
				return nil, fmt.Errorf("opening a stream to cluster %s: %w", cluster, r.err)
			}
			return r.c, nil
		case <-ctx.Done():
			go func() {
				if r := <-done; r.c != nil {
					_ = r.c.Close()
				}
			}()
			return nil, ctx.Err()
		}
	}
}
