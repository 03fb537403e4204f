package kubeletapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// The kubelet API is reachable by anyone who can reach a node address, and every request costs
// the primary's API server work. These bound that work the way the kubelet bounds its own
// (its --authentication-token-webhook-cache-ttl and --authorization-webhook-cache-*-ttl defaults).
const (
	// tokenCacheTTL keeps a TokenReview's answer, authenticated or not. A token revoked in the
	// meantime keeps working that long here, as it does at a kubelet.
	tokenCacheTTL = 2 * time.Minute
	// allowedCacheTTL and deniedCacheTTL keep a SubjectAccessReview's answer. A right granted is
	// seen within deniedCacheTTL; a right revoked keeps working up to allowedCacheTTL.
	allowedCacheTTL = 5 * time.Minute
	deniedCacheTTL  = 30 * time.Second
	// cacheEntries bounds each cache (least recently used first out): a flood of distinct bogus
	// tokens evicts entries but never grows the memory.
	cacheEntries = 4096
	// reviewTimeout bounds one review or pod read, including its wait for the client's limiter.
	reviewTimeout = 10 * time.Second

	// DefaultMaxInFlight is how many requests at once may wait on the primary for a review the
	// caches cannot answer, when Server.MaxInFlight is zero. Past it a request is refused with 429 at
	// once: queueing them would only hold their connections and memory.
	DefaultMaxInFlight = 32
	// ClientQPS and ClientBurst are the rate limit of NewPrimaryClient's client: a few callers
	// (metrics-server, the API server proxying kubectl) whose answers are cached need little; a
	// flood never gets more.
	ClientQPS   = 20
	ClientBurst = 40
)

// NewPrimaryClient returns the kubelet API's own client of the primary, built from the manager's
// config with a rate limiter and a connection of its own. The virtual nodes' Lease renewals go
// through the manager's client: sharing it would let a flood of the kubelet API spend its budget
// and delay the renewals until the nodes go NotReady.
func NewPrimaryClient(cfg *rest.Config) (kubernetes.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = ClientQPS, ClientBurst
	c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(ClientQPS, ClientBurst)
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	c.UserAgent += " kubelet-api" // tells its requests apart in the API server's audit log
	if c.Dial == nil && c.Proxy == nil {
		// A dialer of its own keeps client-go from sharing the manager's cached transport, so its
		// requests never queue on the manager's HTTP/2 connection.
		c.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("building the kubelet API's client of the primary: %w", err)
	}
	return cs, nil
}

// errBusy says that a request needs a review while MaxInFlight requests already wait on one.
var errBusy = errors.New("too many requests waiting on the API server")

// gate authenticates and authorises the kubelet API's callers, with cached reviews, and bounds how
// many requests wait on the primary at once.
type gate struct {
	primary kubernetes.Interface
	log     logr.Logger
	// tokens maps the SHA-256 of a token (never the token) to its tokenResult; decisions maps the
	// SHA-256 of a SubjectAccessReview's spec to whether it was allowed.
	tokens, decisions *cache.LRUExpireCache
	inFlight          chan struct{}
	calls             callGroup
}

func newGate(primary kubernetes.Interface, clk clock.PassiveClock, maxInFlight int, log logr.Logger) *gate {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if maxInFlight <= 0 {
		maxInFlight = DefaultMaxInFlight
	}
	return &gate{primary: primary, log: log, inFlight: make(chan struct{}, maxInFlight),
		tokens:    cache.NewLRUExpireCacheWithClock(cacheEntries, clk),
		decisions: cache.NewLRUExpireCacheWithClock(cacheEntries, clk)}
}

// slot is one request's place among those waiting on the primary for a review. It is taken at the
// first review the caches cannot answer, so that cached callers are served even while a flood holds
// every slot, and given back before the request streams.
type slot struct {
	g    *gate
	held bool
}

func (s *slot) take() error {
	if s.held {
		return nil
	}
	select {
	case s.g.inFlight <- struct{}{}:
		s.held = true
		return nil
	default:
		return errBusy
	}
}

func (s *slot) release() {
	if s.held {
		<-s.g.inFlight
		s.held = false
	}
}

// tokenResult is a TokenReview's answer.
type tokenResult struct {
	who           caller
	authenticated bool
}

// errUnauthenticated says that a bearer token was reviewed and refused, or that there was none.
var errUnauthenticated = errors.New("unauthenticated")

// authenticate says who sent r: errUnauthenticated for no one, errBusy when a review was needed
// and no slot was free.
func (g *gate) authenticate(r *http.Request, s *slot) (caller, error) {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		c := r.TLS.PeerCertificates[0]
		return caller{user: c.Subject.CommonName, groups: c.Subject.Organization, apiServer: true}, nil
	}
	token, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !found || token == "" {
		return caller{}, errUnauthenticated
	}
	key := "token/" + digest([]byte(token))
	v, err := g.cached(r.Context(), g.tokens, key, s, func(ctx context.Context) (any, time.Duration, error) {
		res, err := g.reviewToken(ctx, token)
		return res, tokenCacheTTL, err
	})
	if err != nil {
		return caller{}, err
	}
	res, _ := v.(tokenResult)
	if !res.authenticated {
		return caller{}, errUnauthenticated
	}
	return res.who, nil
}

func (g *gate) reviewToken(ctx context.Context, token string) (tokenResult, error) {
	tr, err := g.primary.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return tokenResult{}, fmt.Errorf("reviewing a bearer token: %w", err)
	}
	if !tr.Status.Authenticated {
		return tokenResult{}, nil
	}
	u := tr.Status.User
	extra := make(map[string]authorizationv1.ExtraValue, len(u.Extra))
	for key, v := range u.Extra {
		extra[key] = authorizationv1.ExtraValue(v)
	}
	return tokenResult{who: caller{user: u.Username, uid: u.UID, groups: u.Groups, extra: extra}, authenticated: true}, nil
}

// allowed says whether the primary allows who what attrs say.
func (g *gate) allowed(ctx context.Context, who caller, attrs authorizationv1.ResourceAttributes, s *slot) (bool, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{User: who.user, UID: who.uid, Groups: who.groups, Extra: who.extra,
		ResourceAttributes: &attrs}
	raw, err := json.Marshal(spec) // map keys sorted: one spec, one key
	if err != nil {
		return false, fmt.Errorf("encoding a SubjectAccessReview: %w", err)
	}
	v, err := g.cached(ctx, g.decisions, "sar/"+digest(raw), s, func(ctx context.Context) (any, time.Duration, error) {
		sar, err := g.primary.AuthorizationV1().SubjectAccessReviews().Create(ctx,
			&authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return false, 0, fmt.Errorf("reviewing access of %s: %w", who.user, err)
		}
		if sar.Status.Allowed {
			return true, allowedCacheTTL, nil
		}
		return false, deniedCacheTTL, nil
	})
	if err != nil {
		return false, err
	}
	ok, _ := v.(bool)
	return ok, nil
}

// cached answers key from c or, on a miss, by review (one call for all concurrent misses of a key,
// within a slot and reviewTimeout), caching its answer for the TTL it gives. Errors are not cached.
func (g *gate) cached(ctx context.Context, c *cache.LRUExpireCache, key string, s *slot,
	review func(context.Context) (any, time.Duration, error)) (any, error) {
	if v, ok := c.Get(key); ok {
		return v, nil
	}
	return g.calls.do(ctx, key, func() (any, error) {
		if v, ok := c.Get(key); ok { // answered while this call waited to lead
			return v, nil
		}
		if err := s.take(); err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, reviewTimeout)
		defer cancel()
		v, ttl, err := review(rctx)
		if err != nil {
			return nil, err
		}
		c.Add(key, v, ttl)
		return v, nil
	})
}

// digest is the hex SHA-256 of b: cache keys never hold a token.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// callGroup runs one call per key at a time; concurrent callers of a key share its result, each
// waiting no longer than its own context allows (singleflight's DoChan with a select).
type callGroup struct {
	group singleflight.Group
}

func (g *callGroup) do(ctx context.Context, key string, fn func() (any, error)) (any, error) {
	select {
	case r := <-g.group.DoChan(key, fn):
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a review: %w", ctx.Err())
	}
}
