package kubeletapi

import (
	"fmt"
	"net/http"
	"time"

	httpstreamspdy "k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport/spdy"
)

// spdyRoundTripperFor is client-go's spdy.RoundTripperFor, except that a config with its own Dial
// is dialled with it: a pulled secondary's exec, attach and port-forward go through its agent's
// tunnel like its other connections (client-go's upgrade dials the server's address directly,
// which nothing answers for such a secondary).
func spdyRoundTripperFor(cfg *rest.Config) (http.RoundTripper, spdy.Upgrader, error) {
	if cfg.Dial == nil {
		return spdy.RoundTripperFor(cfg)
	}
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("the TLS configuration of %s: %w", cfg.Host, err)
	}
	// The upgrade dials with this transport's DialContext, then speaks TLS with its config.
	upgrade := &http.Transport{DialContext: cfg.Dial, TLSClientConfig: tlsConfig}
	rt, err := httpstreamspdy.NewRoundTripperWithConfig(httpstreamspdy.RoundTripperConfig{UpgradeTransport: upgrade, PingPeriod: 5 * time.Second})
	if err != nil {
		return nil, nil, err
	}
	wrapped, err := rest.HTTPWrappersForConfig(cfg, rt)
	if err != nil {
		return nil, nil, err
	}
	return wrapped, rt, nil
}
