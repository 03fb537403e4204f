package kubeletapi

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/util/httpstream"
	httpstreamspdy "k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport/spdy"
)

// A stream to a secondary whose config dials its own way (a pulled one: through its agent's
// tunnel) is dialled that way, not at the server's address.
func TestSPDYStreamsDialAsTheConfigDoes(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if _, err := httpstream.Handshake(req, w, []string{"test.flotilla.dev"}); err != nil {
			return
		}
		conn := httpstreamspdy.NewResponseUpgrader().UpgradeResponse(w, req, func(httpstream.Stream, <-chan struct{}) error { return nil })
		if conn != nil {
			<-conn.CloseChan()
		}
	}))
	defer srv.Close()
	var dials atomic.Int32
	cfg := &rest.Config{
		// TEST-NET-1: nothing answers there, so a stream that works was dialled by Dial.
		Host:            "https://192.0.2.1:6443",
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, network, srv.Listener.Addr().String())
		},
	}
	transport, upgrader, err := spdyRoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, cfg.Host+"/api/v1/namespaces/a/pods/b/exec", nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, protocol, err := spdy.Negotiate(upgrader, &http.Client{Transport: transport}, req, "test.flotilla.dev")
	if err != nil {
		t.Fatalf("upgrade through the config's Dial: %v", err)
	}
	defer conn.Close()
	if protocol != "test.flotilla.dev" || dials.Load() != 1 {
		t.Errorf("protocol %q after %d dials, want test.flotilla.dev after 1", protocol, dials.Load())
	}
}
