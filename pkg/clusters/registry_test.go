package clusters

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/tunnel"
)

func kubeconfig(t *testing.T, contexts map[string]string) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for ctx, server := range contexts {
		cfg.Clusters[ctx] = &clientcmdapi.Cluster{Server: server}
		cfg.AuthInfos[ctx] = &clientcmdapi.AuthInfo{Token: "t-" + ctx}
		cfg.Contexts[ctx] = &clientcmdapi.Context{Cluster: ctx, AuthInfo: ctx}
	}
	raw, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func names(r *Registry) []string {
	var out []string
	for _, s := range r.Snapshots() {
		out = append(out, s.Name)
	}
	return out
}

// The registry is not started here: Apply only registers, no probe runs.
func TestApplyAddsRemovesAndKeepsTheLastGoodConfiguration(t *testing.T) {
	r := NewRegistry(Options{PrimaryID: "p"}, logr.Discard())
	if r.Configured() {
		t.Fatal("configured before any Apply")
	}
	if err := r.Apply(kubeconfig(t, map[string]string{"a": "https://a", "gke_p_z_n": "https://b"})); err != nil {
		t.Fatal(err)
	}
	got := names(r)
	if len(got) != 2 || got[0] != "a" || got[1][:10] != "gke-p-z-n-" {
		t.Fatalf("clusters = %v", got)
	}
	s, _ := r.Snapshot("a")
	if s.Status != flotillav1.ClusterUnknown || s.Reason != flotillav1.ReasonProbing || s.Entry.Context != "a" {
		t.Errorf("new cluster snapshot = %+v", s)
	}

	if err := r.Apply([]byte("garbage: [")); err == nil {
		t.Fatal("garbage applied without error")
	}
	if r.ConfigError() == nil || len(names(r)) != 2 {
		t.Fatalf("after garbage: error %v, clusters %v", r.ConfigError(), names(r))
	}
	if err := r.Apply(nil); !errors.Is(err, ErrSecretMissing) || len(names(r)) != 2 {
		t.Fatalf("missing Secret: error %v, clusters %v", err, names(r))
	}

	// A secondary whose context vanishes is detached, not forgotten: nothing of it may be deleted.
	gke := names(r)[1]
	r.mu.Lock()
	r.clusters[gke].state.Role, r.clusters[gke].state.ID = RoleSecondary, "id-gke" // as if it had answered
	r.mu.Unlock()
	if err := r.Apply(kubeconfig(t, map[string]string{"a": "https://a"})); err != nil {
		t.Fatal(err)
	}
	if got := names(r); len(got) != 2 || r.ConfigError() != nil {
		t.Fatalf("after the context vanished: %v, error %v", got, r.ConfigError())
	}
	if s, _ := r.Snapshot(gke); s.Reason != flotillav1.ReasonNotRegistered || s.Status != flotillav1.ClusterUnknown || r.Removed(gke) {
		t.Errorf("vanished cluster snapshot = %+v", s)
	}
	if _, ok := r.Secondary(gke); ok {
		t.Error("a detached cluster hands out clients")
	}
	// Removed on purpose (flotillactl cluster remove): let go.
	r.SetRemoved(map[string]bool{gke: true})
	if err := r.Apply(kubeconfig(t, map[string]string{"a": "https://a"})); err != nil {
		t.Fatal(err)
	}
	if got := names(r); len(got) != 1 || got[0] != "a" || !r.Removed(gke) {
		t.Fatalf("after removal: %v", got)
	}
}

func TestApplyReportsChangesToClusterSources(t *testing.T) {
	r := NewRegistry(Options{PrimaryID: "p"}, logr.Discard())
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := r.ClusterSource(&handler.EnqueueRequestForObject{}).Start(t.Context(), q); err != nil {
		t.Fatal(err)
	}
	drain := func() map[string]bool {
		seen := map[string]bool{}
		for q.Len() > 0 {
			req, _ := q.Get()
			seen[req.Name] = true
			q.Done(req)
		}
		return seen
	}
	if seen := drain(); !seen[""] || len(seen) != 1 {
		t.Fatalf("announced at start %v, want only the registration (\"\")", seen)
	}
	if err := r.Apply(kubeconfig(t, map[string]string{"a": "https://a"})); err != nil {
		t.Fatal(err)
	}
	if seen := drain(); !seen["a"] || !seen[""] {
		t.Fatalf("enqueued %v, want the cluster and the registry (\"\")", seen)
	}
	// Only the token changes: the same cluster object stays, subscribers hear of it.
	cfg, _ := clientcmd.Load(kubeconfig(t, map[string]string{"a": "https://a"}))
	cfg.AuthInfos["a"].Token = "renewed"
	raw, _ := clientcmd.Write(*cfg)
	r.mu.Lock()
	before := r.clusters["a"]
	r.mu.Unlock()
	if err := r.Apply(raw); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	after := r.clusters["a"]
	r.mu.Unlock()
	if before != after || after.currentToken() != "renewed" {
		t.Fatalf("token change replaced the connection (%v) or lost the token (%q)", before != after, after.currentToken())
	}
}

func TestInvalidContextIsAClusterWithTheReason(t *testing.T) {
	cfg := clientcmdapi.NewConfig()
	cfg.Contexts["broken"] = &clientcmdapi.Context{Cluster: "missing", AuthInfo: "missing"}
	raw, _ := clientcmd.Write(*cfg)
	r := NewRegistry(Options{PrimaryID: "p"}, logr.Discard())
	if err := r.Apply(raw); err != nil {
		t.Fatal(err)
	}
	s, ok := r.Snapshot("broken")
	if !ok || s.Reason != flotillav1.ReasonInvalidContext || s.Status != flotillav1.ClusterUnknown {
		t.Fatalf("snapshot = %+v", s)
	}
	if s.UsableSecondary() {
		t.Error("an invalid context is not a usable secondary")
	}
}

func TestKnownIDsKeepASecondaryUsableBeforeItAnswers(t *testing.T) {
	r := NewRegistry(Options{PrimaryID: "p", KnownIDs: map[string]string{"a": "id-a", "self": "p"}}, logr.Discard())
	if err := r.Apply(kubeconfig(t, map[string]string{"a": "https://a", "self": "https://p"})); err != nil {
		t.Fatal(err)
	}
	if s, _ := r.Snapshot("a"); !s.UsableSecondary() || s.Status != flotillav1.ClusterUnknown {
		t.Errorf("a = %+v, want a usable secondary, Unknown", s)
	}
	if s, _ := r.Snapshot("self"); s.Role != RolePrimary || s.UsableSecondary() {
		t.Errorf("self = %+v, want the primary", s)
	}
}

func TestClaimRefusesASecondRegistrationOfTheSameCluster(t *testing.T) {
	r := NewRegistry(Options{PrimaryID: "p"}, logr.Discard())
	if err := r.Apply(kubeconfig(t, map[string]string{"a": "https://a", "b": "https://a"})); err != nil {
		t.Fatal(err)
	}
	if owner := r.claim("x", "a"); owner != "a" {
		t.Fatalf("first claim owner = %s", owner)
	}
	if owner := r.claim("x", "b"); owner != "a" {
		t.Fatalf("second claim owner = %s, want a", owner)
	}
	if err := r.Apply(kubeconfig(t, map[string]string{"b": "https://a"})); err != nil {
		t.Fatal(err)
	}
	if owner := r.claim("x", "b"); owner != "b" {
		t.Fatalf("after a's removal, owner = %s, want b", owner)
	}
}

// The same cluster added under a second name is pinned to the same ID as the first: whatever
// order the pins are read in, the second name is the duplicate, never the first.
func TestAPinNeverTakesAnIdentityFromTheClusterThatClaimedItFirst(t *testing.T) {
	for _, second := range []string{"again", "a-again", "zz"} {
		r := NewRegistry(Options{PrimaryID: "p"}, logr.Discard())
		if err := r.Apply(kubeconfig(t, map[string]string{"secondary1": "https://a", second: "https://a"})); err != nil {
			t.Fatal(err)
		}
		if owner := r.claim("x", "secondary1"); owner != "secondary1" {
			t.Fatalf("first claim owner = %s", owner)
		}
		for range 20 { // a map's order differs from one range to the next
			r.SetPinned(map[string]string{"secondary1": "x", second: "x"})
			if owner := r.claim("x", second); owner != "secondary1" {
				t.Fatalf("%s pinned to the same ID took it: owner = %s, want secondary1", second, owner)
			}
			if owner := r.claim("x", "secondary1"); owner != "secondary1" {
				t.Fatalf("secondary1 lost its identity to %s", owner)
			}
		}
	}
}

func jwt(t *testing.T, claims map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	return "e30." + base64.RawURLEncoding.EncodeToString(raw) + ".sig"
}

func TestTokenHelpers(t *testing.T) {
	exp := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	got, err := TokenExpiry(jwt(t, map[string]any{"exp": exp.Unix()}))
	if err != nil || got == nil || !got.Equal(exp) {
		t.Errorf("TokenExpiry = %v, %v", got, err)
	}
	if got, err := TokenExpiry(""); got != nil || err != nil {
		t.Errorf("empty token: %v, %v", got, err)
	}
	if _, err := TokenExpiry("not-a-jwt"); err == nil {
		t.Error("a non-JWT token should be an error")
	}
}

func TestProbeFailureNamesTheReason(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	jwt := func(exp time.Time) string {
		claims, _ := json.Marshal(map[string]any{"iat": exp.Add(-24 * time.Hour).Unix(), "exp": exp.Unix(), "sub": "system:serviceaccount:flotilla-system:flotilla-ab"})
		return "e30." + base64.RawURLEncoding.EncodeToString(claims) + ".sig"
	}
	unauthorized := apierrors.NewUnauthorized("Unauthorized")
	for _, tc := range []struct {
		name  string
		err   error
		token string
		want  string
	}{
		{"unreachable", errors.New("dial tcp: connection refused"), "", flotillav1.ReasonProbeFailed},
		{"refused, token still valid", unauthorized, jwt(now.Add(time.Hour)), flotillav1.ReasonUnauthorized},
		{"refused, token expired during an outage", unauthorized, jwt(now.Add(-time.Minute)), flotillav1.ReasonTokenExpired},
		{"refused, not a JWT (a client certificate user)", unauthorized, "", flotillav1.ReasonUnauthorized},
		{"forbidden, token expired: not an expiry", apierrors.NewForbidden(schema.GroupResource{}, "", errors.New("no")), jwt(now.Add(-time.Minute)), flotillav1.ReasonUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, msg := probeFailure(tc.err, tc.token, now)
			if r != tc.want {
				t.Errorf("reason = %s (%s), want %s", r, msg, tc.want)
			}
			if r == flotillav1.ReasonTokenExpired && !strings.Contains(msg, "flotillactl cluster join") {
				t.Errorf("message %q does not say how to recover", msg)
			}
			if strings.Contains(msg, tc.token) && tc.token != "" {
				t.Error("the message carries the token")
			}
		})
	}
}

func TestAContextThatNeverAnsweredIsDroppedWhenItGoes(t *testing.T) {
	r := NewRegistry(Options{PrimaryID: "p"}, logr.Discard())
	if err := r.Apply(kubeconfig(t, map[string]string{"a": "https://a", "bogus": "https://bogus"})); err != nil {
		t.Fatal(err)
	}
	if err := r.Apply(kubeconfig(t, map[string]string{"a": "https://a"})); err != nil {
		t.Fatal(err)
	}
	if got := names(r); len(got) != 1 || got[0] != "a" {
		t.Fatalf("clusters = %v: a context that was never a usable secondary has nothing to keep", got)
	}
}

func TestAManagerStartingWithoutTheSecretKeepsTheClustersItKnew(t *testing.T) {
	r := NewRegistry(Options{PrimaryID: "p", KnownIDs: map[string]string{"eu": "id-eu", "primary": "p", "gone": "id-gone"}}, logr.Discard())
	r.SetRemoved(map[string]bool{"gone": true})
	if err := r.Apply(nil); !errors.Is(err, ErrSecretMissing) {
		t.Fatalf("missing Secret: %v", err)
	}
	got := names(r)
	if len(got) != 1 || got[0] != "eu" {
		t.Fatalf("clusters = %v, want the known secondary only (not the primary, not a removed one)", got)
	}
	s, _ := r.Snapshot("eu")
	if !s.UsableSecondary() || s.Reason != flotillav1.ReasonNotRegistered || s.ID != "id-eu" {
		t.Errorf("known cluster = %+v: its virtual node must stay", s)
	}
	// Its context comes back: registered again under the same name, identity kept.
	if err := r.Apply(kubeconfig(t, map[string]string{"eu": "https://eu"})); err != nil {
		t.Fatal(err)
	}
	if s, _ := r.Snapshot("eu"); s.Reason == flotillav1.ReasonNotRegistered || s.ID != "id-eu" {
		t.Errorf("re-registered cluster = %+v", s)
	}
}

// recordingTunnels fails every dial, naming the cluster, and records which clusters were dialled.
type recordingTunnels struct{ dialled chan string }

func (recordingTunnels) Status(cluster string) tunnel.Status {
	return tunnel.Status{LastError: "no agent of " + cluster + " in this test"}
}

func (t recordingTunnels) Dialer(cluster string) func(context.Context, string, string) (net.Conn, error) {
	return func(context.Context, string, string) (net.Conn, error) {
		t.dialled <- cluster
		return nil, fmt.Errorf("no tunnel from %s in this test", cluster)
	}
}

func TestAPulledClusterIsDialledOnlyThroughItsTunnel(t *testing.T) {
	raw := kubeconfig(t, map[string]string{"edge": "https://192.0.2.1:6443", "core": "https://192.0.2.2:6443"})
	pulled := map[string]string{"edge": ModePull}

	// A manager serving no tunnel says so, and never dials the address.
	r := NewRegistry(Options{PrimaryID: "p"}, logr.Discard())
	r.SetModes(pulled)
	if err := r.Apply(raw); err != nil {
		t.Fatal(err)
	}
	s, _ := r.Snapshot("edge")
	if s.Mode != ModePull || s.Reason != flotillav1.ReasonInvalidContext || !strings.Contains(s.Message, "--tunnel-bind-address") {
		t.Fatalf("edge without a tunnel = %+v", s)
	}

	// With one, every connection of the pulled cluster is a tunnel dial; the other's are not.
	tunnels := recordingTunnels{dialled: make(chan string, 10)}
	r = NewRegistry(Options{PrimaryID: "p", Tunnels: tunnels, CallTimeout: time.Second}, logr.Discard())
	r.SetModes(pulled)
	if err := r.Apply(raw); err != nil {
		t.Fatal(err)
	}
	edge := r.clusters["edge"]
	if _, err := edge.client.Discovery().ServerVersion(); err == nil || !strings.Contains(err.Error(), "no tunnel from edge") {
		t.Fatalf("a request to edge = %v; want the tunnel's dial error", err)
	}
	if got := <-tunnels.dialled; got != "edge" {
		t.Fatalf("dialled %q", got)
	}
	if s, _ := r.Snapshot("edge"); s.Tunnel == nil || s.Tunnel.LastError != "no agent of edge in this test" {
		t.Fatalf("edge's tunnel = %+v", s.Tunnel)
	}
	if s, _ := r.Snapshot("core"); s.Mode != "" || s.Tunnel != nil {
		t.Fatalf("core's mode = %q, tunnel %+v", s.Mode, s.Tunnel)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := r.clusters["core"].client.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw(); err == nil || strings.Contains(err.Error(), "no tunnel") {
		t.Fatalf("a request to core = %v; want a direct dial's error", err)
	}
	if len(tunnels.dialled) != 0 {
		t.Fatal("a cluster registered without the mode went through a tunnel")
	}

	// A change of mode restarts the connection; an unknown mode is refused.
	r.SetModes(map[string]string{"edge": "carrier-pigeon"})
	if err := r.Apply(raw); err != nil {
		t.Fatal(err)
	}
	if r.clusters["edge"] == edge {
		t.Fatal("a change of mode kept the connection")
	}
	if s, _ := r.Snapshot("edge"); s.Reason != flotillav1.ReasonInvalidContext || !strings.Contains(s.Message, `unknown mode "carrier-pigeon"`) {
		t.Fatalf("edge in an unknown mode = %+v", s)
	}
}
