package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// server answers every request with who it is (its pod, node and host names, from the
// environment the pod spec gives it), logs each request, serves a readiness endpoint that can be
// flipped, and exits on request with a chosen code. On SIGTERM it stops accepting, lets the
// requests in flight finish (the drain), says so, and exits 0.
type server struct {
	log   io.Writer
	ready atomic.Bool
	exit  chan int
}

// serve runs the HTTP server until SIGTERM or an /exit request; it returns the exit code.
func serve(ctx context.Context, log io.Writer, args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(log)
	addr := fs.String("listen", ":"+envOr("PORT", "8080"), "address to listen on")
	drain := fs.Duration("drain", durationEnv("DRAIN", 2*time.Second), "how long SIGTERM waits for requests in flight")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(log, "listen:", err)
		return 1
	}
	s := newServer(log)
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(log, "serve:", err)
			s.exit <- 1
		}
	}()
	fmt.Fprintf(log, "serving on %s as %s\n", ln.Addr(), s.identity())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case code := <-s.exit:
		fmt.Fprintf(log, "exiting with code %d on request\n", code)
		return code
	case got := <-sig:
		fmt.Fprintf(log, "%s: draining for up to %s\n", got, *drain)
		s.ready.Store(false)
		ctx, cancel := context.WithTimeout(ctx, *drain)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			fmt.Fprintln(log, "drain cut short:", err)
			return 1
		}
		fmt.Fprintln(log, "drained, exiting 0")
		return 0
	}
}

func newServer(log io.Writer) *server {
	s := &server{log: log, exit: make(chan int, 1)}
	s.ready.Store(os.Getenv("START_NOT_READY") == "")
	return s
}

// identity is what every answer says: the pod, its node, its host name.
func (s *server) identity() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("pod=%s namespace=%s node=%s host=%s", envOr("POD_NAME", "-"), envOr("POD_NAMESPACE", "-"), envOr("NODE_NAME", "-"), host)
}

func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s\n", s.identity())
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("/ready/on", func(w http.ResponseWriter, _ *http.Request) { s.ready.Store(true); fmt.Fprintln(w, "ready on") })
	mux.HandleFunc("/ready/off", func(w http.ResponseWriter, _ *http.Request) { s.ready.Store(false); fmt.Fprintln(w, "ready off") })
	mux.HandleFunc("/exit", func(w http.ResponseWriter, r *http.Request) {
		code, err := strconv.Atoi(r.URL.Query().Get("code"))
		if err != nil {
			code = 1
		}
		fmt.Fprintf(w, "exiting with code %d\n", code)
		select {
		case s.exit <- code:
		default:
		}
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(s.log, "request %s %s from %s\n", r.Method, r.URL.Path, r.RemoteAddr)
		mux.ServeHTTP(w, r)
	})
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func durationEnv(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}
