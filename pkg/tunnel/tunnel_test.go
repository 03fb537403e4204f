package tunnel

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/flotilla-dev/flotilla/pkg/pki"
	"github.com/flotilla-dev/flotilla/pkg/tunnel/hello"
)

// servingCert returns a certificate for 127.0.0.1 and a pool of the CA that issued it.
func servingCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	now := time.Now()
	ca, err := pki.NewCA("tunnel-test", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.IssueServer(nil, []net.IP{net.ParseIP("127.0.0.1")}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return cert, pool
}

// echo serves, on loopback, connections that answer every line with "<name>: <line>".
func echo(t *testing.T, name string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					if _, err := fmt.Fprintf(c, "%s: %s", name, buf[:n]); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

type bed struct {
	server *Server
	addr   string
	pool   *x509.CertPool
	cancel context.CancelFunc
	done   chan struct{}
}

// tokens maps each token to its cluster, as TokenReviewer does with ServiceAccounts.
var tokens = map[string]string{"token-of-secondary1": "secondary1", "token-of-secondary2": "secondary2"}

func authenticate(_ context.Context, token string) (string, error) {
	if c, ok := tokens[token]; ok {
		return c, nil
	}
	return "", errors.New("unknown token")
}

func startServer(t *testing.T, opts Options) *bed {
	t.Helper()
	cert, pool := servingCert(t)
	if opts.Authenticate == nil {
		opts.Authenticate = authenticate
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	b := &bed{server: NewServer(opts, logr.Discard()), addr: l.Addr().String(), pool: pool, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		_ = b.server.Serve(ctx, l)
	}()
	t.Cleanup(func() {
		cancel()
		<-b.done
	})
	return b
}

// startAgent runs an agent claiming cluster with token, forwarding to upstream, until the test ends.
func (b *bed) startAgent(t *testing.T, cluster, token, upstream string) (*Agent, context.CancelFunc) {
	t.Helper()
	a := NewAgent(AgentOptions{
		Cluster: cluster, Address: b.addr, Upstream: upstream,
		TLS:        &tls.Config{RootCAs: b.pool, MinVersion: tls.VersionTLS13},
		Token:      func(context.Context) (string, error) { return token, nil },
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	}, logr.Discard())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.Run(ctx)
	}()
	stop := func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return a, stop
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// roundTrip dials cluster through the server and says hello over the stream.
func roundTrip(ctx context.Context, s *Server, cluster string) (string, error) {
	c, err := s.Dialer(cluster)(ctx, "tcp", "ignored:443")
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	if _, err := io.WriteString(c, "hello\n"); err != nil {
		return "", err
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	return string(buf[:n]), err
}

func TestTheServerDialsEachClusterThroughItsOwnAgent(t *testing.T) {
	b := startServer(t, Options{})
	ctx := t.Context()
	if _, err := roundTrip(ctx, b.server, "secondary2"); !errors.Is(err, ErrNoTunnel) {
		t.Fatalf("a dial before any agent = %v; want ErrNoTunnel at once", err)
	}
	b.startAgent(t, "secondary1", "token-of-secondary1", echo(t, "api1"))
	b.startAgent(t, "secondary2", "token-of-secondary2", echo(t, "api2"))
	eventually(t, "both agents connected", func() bool {
		return b.server.Status("secondary1").Connected && b.server.Status("secondary2").Connected
	})
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cluster, want := "secondary1", "api1: hello\n"
			if i%2 == 1 {
				cluster, want = "secondary2", "api2: hello\n"
			}
			if got, err := roundTrip(ctx, b.server, cluster); err != nil || got != want {
				t.Errorf("through %s: %q, %v; want %q", cluster, got, err, want)
			}
		}()
	}
	wg.Wait()
}

func TestAnAgentMayServeOnlyTheClusterItsCredentialBelongsTo(t *testing.T) {
	b := startServer(t, Options{})
	a, _ := b.startAgent(t, "secondary2", "token-of-secondary1", echo(t, "api1"))
	eventually(t, "the refusal seen by both sides", func() bool {
		return strings.Contains(a.Status().LastError, "not authorized for this cluster") &&
			strings.Contains(b.server.Status("secondary2").LastError, `an agent of cluster "secondary1" claimed cluster "secondary2"`)
	})
	if st := b.server.Status("secondary2"); st.Connected || st.Connects != 0 {
		t.Fatalf("secondary2's tunnel = %+v; want none", st)
	}
	if _, err := roundTrip(t.Context(), b.server, "secondary2"); !errors.Is(err, ErrNoTunnel) {
		t.Fatalf("a dial to secondary2 = %v; want ErrNoTunnel", err)
	}
	a2, _ := b.startAgent(t, "secondary1", "no-such-token", echo(t, "api1"))
	eventually(t, "an unknown token refused", func() bool {
		return strings.Contains(a2.Status().LastError, "not authorized") && !b.server.Status("secondary1").Connected
	})
}

func TestARestartedAgentReplacesItsSessionAndTheTunnelComesBack(t *testing.T) {
	b := startServer(t, Options{KeepAlive: 200 * time.Millisecond})
	upstream := echo(t, "api2")
	_, stop := b.startAgent(t, "secondary2", "token-of-secondary2", upstream)
	eventually(t, "connected", func() bool { return b.server.Status("secondary2").Connected })
	stop()
	eventually(t, "the closed session noticed", func() bool { return !b.server.Status("secondary2").Connected })
	if _, err := roundTrip(t.Context(), b.server, "secondary2"); !errors.Is(err, ErrNoTunnel) {
		t.Fatalf("a dial while the agent is away = %v; want ErrNoTunnel", err)
	}
	b.startAgent(t, "secondary2", "token-of-secondary2", upstream)
	eventually(t, "reconnected", func() bool {
		st := b.server.Status("secondary2")
		return st.Connected && st.Connects == 2
	})
	if got, err := roundTrip(t.Context(), b.server, "secondary2"); err != nil || got != "api2: hello\n" {
		t.Fatalf("after the agent's return: %q, %v", got, err)
	}
	eventually(t, "a keepalive's round trip", func() bool { return b.server.Status("secondary2").RTT > 0 })
}

func TestTheAgentReconnectsWhenTheEndpointDropsIt(t *testing.T) {
	b := startServer(t, Options{KeepAlive: 200 * time.Millisecond})
	a, _ := b.startAgent(t, "secondary2", "token-of-secondary2", echo(t, "api2"))
	eventually(t, "connected", func() bool { return a.Status().Connected })
	b.server.closeAll()
	eventually(t, "connected again", func() bool { return a.Status().Connects == 2 && a.Status().Connected })
	eventually(t, "usable again", func() bool {
		got, err := roundTrip(t.Context(), b.server, "secondary2")
		return err == nil && got == "api2: hello\n"
	})
}

// Clients that never handshake, or send garbage, cost a goroutine each only until the handshake
// timeout, at most MaxHandshakes at once; the rest are closed as they come.
func TestUnauthenticatedClientsCostBoundedGoroutines(t *testing.T) {
	b := startServer(t, Options{HandshakeTimeout: 200 * time.Millisecond, MaxHandshakes: 16})
	before := runtime.NumGoroutine()
	var conns []net.Conn
	for i := range 2000 {
		c, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			_, _ = io.WriteString(c, "GET / HTTP/1.1\r\n\r\n")
		}
		conns = append(conns, c)
		if n := runtime.NumGoroutine(); n > before+16+50 {
			t.Fatalf("%d goroutines after %d silent clients (%d before)", n, i+1, before)
		}
	}
	for _, c := range conns {
		_ = c.Close()
	}
	eventually(t, "goroutines back", func() bool { return runtime.NumGoroutine() <= before+5 })
	// And an agent still gets in.
	b.startAgent(t, "secondary2", "token-of-secondary2", echo(t, "api2"))
	eventually(t, "an agent connected after the flood", func() bool { return b.server.Status("secondary2").Connected })
}

// Hellos claiming ever new names with a bad credential leave at most maxRefusedNames refusals
// remembered, whatever their number.
func TestRefusalsOfStrangersAreRememberedWithinABound(t *testing.T) {
	b := startServer(t, Options{})
	for i := range maxRefusedNames + 200 {
		conn, err := tls.Dial("tcp", b.addr, &tls.Config{RootCAs: b.pool, MinVersion: tls.VersionTLS13})
		if err != nil {
			t.Fatal(err)
		}
		if err := hello.Write(conn, hello.Hello{Cluster: fmt.Sprintf("claimed-%d", i), Token: "forged"}); err != nil {
			t.Fatal(err)
		}
		if err := hello.ReadReply(bufio.NewReader(conn)); err == nil {
			t.Fatal("a forged token was accepted")
		}
		_ = conn.Close()
	}
	b.server.mu.Lock()
	remembered := len(b.server.status)
	b.server.mu.Unlock()
	if remembered > maxRefusedNames {
		t.Fatalf("%d refusals remembered; at most %d", remembered, maxRefusedNames)
	}
	if st := b.server.Status("claimed-0"); !strings.Contains(st.LastError, "was refused") {
		t.Fatalf("the first refusal = %+v", st)
	}
}

// blackHole is a connection whose traffic, while the network is cut, is dropped both ways without
// a close on either side: what a firewall's DROP rule does to a TCP connection. The peer's close is
// lost in the cut too, and arrives lateClose after the network is back (the peer's kernel sending
// it again); a close of this end ends a read at once, as a socket's does.
type blackHole struct {
	net.Conn
	cut    *atomic.Bool
	closed chan struct{}
	once   sync.Once
}

func newBlackHole(c net.Conn, cut *atomic.Bool) *blackHole {
	return &blackHole{Conn: c, cut: cut, closed: make(chan struct{})}
}

func (c *blackHole) Read(b []byte) (int, error) {
	for {
		n, err := c.Conn.Read(b)
		switch {
		case err != nil && c.cut.Load() && !errors.Is(err, net.ErrClosed):
			for c.cut.Load() {
				select {
				case <-c.closed:
					return 0, net.ErrClosed
				case <-time.After(10 * time.Millisecond):
				}
			}
			select {
			case <-c.closed:
				return 0, net.ErrClosed
			case <-time.After(lateClose):
			}
			return n, err
		case err != nil || !c.cut.Load():
			return n, err
		}
	}
}

func (c *blackHole) Write(b []byte) (int, error) {
	if c.cut.Load() {
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *blackHole) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// lateClose is how long after a cut a peer's lost close reaches the other end.
const lateClose = 30 * time.Second

// An agent whose connection the network drops (nothing closed, nothing answered) leaves the
// session within its keepalive, and is back soon after the network is: it does not wait for the
// endpoint's close, lost in the cut, to reach it.
func TestTheAgentLeavesASessionTheNetworkDropsAndIsBackWhenItIsNot(t *testing.T) {
	b := startServer(t, Options{KeepAlive: 200 * time.Millisecond})
	var cut atomic.Bool
	d := &net.Dialer{}
	a := NewAgent(AgentOptions{
		Cluster: "secondary2", Address: b.addr, Upstream: echo(t, "api2"),
		TLS:        &tls.Config{RootCAs: b.pool, MinVersion: tls.VersionTLS13},
		Token:      func(context.Context) (string, error) { return "token-of-secondary2", nil },
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, DialTimeout: 500 * time.Millisecond,
		KeepAlive: 200 * time.Millisecond,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil || addr != b.addr {
				return c, err
			}
			return newBlackHole(c, &cut), nil
		},
	}, logr.Discard())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	eventually(t, "connected", func() bool { return a.Status().Connected })
	cut.Store(true)
	eventually(t, "the agent leaves the dropped session", func() bool { return !a.Status().Connected })
	cut.Store(false)
	eventually(t, "usable again", func() bool {
		got, err := roundTrip(t.Context(), b.server, "secondary2")
		return err == nil && got == "api2: hello\n"
	})
}
