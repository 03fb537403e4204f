package clusters

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// fakeAPIServer answers a probe (/readyz), the identity read (kube-system's UID) and /version, as
// a cluster whose kube-system UID can be changed, as when it is rebuilt behind the same URL. It
// answers nothing else (404): informers and the FlotillaPrimary check fail, which the identity
// decisions do not depend on.
type fakeAPIServer struct {
	*httptest.Server
	mu  sync.Mutex
	uid string
}

func newFakeAPIServer(t *testing.T, uid string) *fakeAPIServer {
	t.Helper()
	f := &fakeAPIServer{uid: uid}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch req.URL.Path {
		case "/readyz":
			_, _ = w.Write([]byte("ok"))
		case "/version":
			_, _ = w.Write([]byte(`{"major":"1","minor":"35","gitVersion":"v1.35.4"}`))
		case "/api/v1/namespaces/kube-system":
			f.mu.Lock()
			uid := f.uid
			f.mu.Unlock()
			_, _ = fmt.Fprintf(w, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"kube-system","uid":%q}}`, uid)
		default:
			http.NotFound(w, req)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPIServer) setUID(uid string) {
	f.mu.Lock()
	f.uid = uid
	f.mu.Unlock()
}

// registration registers one context per name, reaching the given servers.
func registration(t *testing.T, servers map[string]string) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for name, url := range servers {
		cfg.Clusters[name] = &clientcmdapi.Cluster{Server: url}
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "t-" + name}
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	raw, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func startRegistry(t *testing.T, opts Options, raw []byte) *Registry {
	t.Helper()
	opts.PrimaryID, opts.ProbeInterval, opts.ProbeTimeout = "primary-uid", 20*time.Millisecond, time.Second
	r := NewRegistry(opts, logr.Discard())
	if err := r.Apply(raw); err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.Start(t.Context()) }()
	return r
}

// waitFor polls the snapshot of a cluster until ok says yes, or fails after 5 s.
func waitFor(t *testing.T, r *Registry, name, what string, ok func(Snapshot) bool) Snapshot {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, _ := r.Snapshot(name)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not %s within 5s: %+v", name, what, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func identityChanged(s Snapshot) bool {
	return s.Reason == flotillav1.ReasonIdentityChanged && s.Status == flotillav1.ClusterUnknown
}

// expectUnusable checks that a cluster whose identity changed keeps its pinned ID and its virtual
// node (nothing of it is deleted or failed over) and hands out no client (nothing of it is touched).
func expectUnusable(t *testing.T, r *Registry, name, pinned string) {
	t.Helper()
	s, _ := r.Snapshot(name)
	if s.ID != pinned || !s.UsableSecondary() {
		t.Errorf("%s: ID %q usable %v, want the pinned %q and its virtual node kept", name, s.ID, s.UsableSecondary(), pinned)
	}
	if _, ok := r.Secondary(name); ok {
		t.Errorf("%s: a cluster whose identity changed hands out its clients", name)
	}
}

// A manager that starts and finds another cluster behind a known secondary's URL (rebuilt, or
// someone else's answering with another kube-system UID) does not take it for that secondary.
func TestAKnownSecondaryAnsweringWithAnotherIDIsIdentityChanged(t *testing.T) {
	api := newFakeAPIServer(t, "rebuilt-uid")
	r := startRegistry(t, Options{KnownIDs: map[string]string{"eu": "first-uid"}}, registration(t, map[string]string{"eu": api.URL}))
	s := waitFor(t, r, "eu", "IdentityChanged", identityChanged)
	expectUnusable(t, r, "eu", "first-uid")
	for _, want := range []string{"rebuilt-uid", "first-uid", "flotillactl cluster join"} {
		if !strings.Contains(s.Message, want) {
			t.Errorf("message %q does not name %q", s.Message, want)
		}
	}
	// `flotillactl cluster join` of that context pins the cluster that answers now.
	r.SetPinned(map[string]string{"eu": "rebuilt-uid"})
	waitFor(t, r, "eu", "Running with the new ID", func(s Snapshot) bool {
		return s.Status == flotillav1.ClusterRunning && s.ID == "rebuilt-uid"
	})
	if _, ok := r.Secondary("eu"); !ok {
		t.Error("the re-pinned cluster is not usable")
	}
}

// A pin in the registration Secret wins over the ID recorded before, and is what join writes.
func TestThePinInTheRegistrationWins(t *testing.T) {
	api := newFakeAPIServer(t, "recorded-uid")
	opts := Options{KnownIDs: map[string]string{"eu": "recorded-uid"}}
	opts.PrimaryID, opts.ProbeInterval, opts.ProbeTimeout = "primary-uid", 20*time.Millisecond, time.Second
	r := NewRegistry(opts, logr.Discard())
	secret := &corev1.Secret{}
	setPinnedIDs(secret, map[string]string{"eu": "joined-uid", "us": "us-uid"})
	if got := secret.Annotations[AnnotationClusterIDs]; got != "eu=joined-uid,us=us-uid" {
		t.Fatalf("annotation = %q", got)
	}
	r.SetPinned(PinnedIDs(secret))
	if err := r.Apply(registration(t, map[string]string{"eu": api.URL})); err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.Start(t.Context()) }()
	waitFor(t, r, "eu", "IdentityChanged", identityChanged)
	expectUnusable(t, r, "eu", "joined-uid")
}

// The first ID seen is pinned: a secondary rebuilt while the manager runs is not silently replaced.
func TestASecondaryRebuiltWhileRunningIsIdentityChanged(t *testing.T) {
	api := newFakeAPIServer(t, "first-uid")
	r := startRegistry(t, Options{}, registration(t, map[string]string{"eu": api.URL}))
	waitFor(t, r, "eu", "Running with its first ID", func(s Snapshot) bool {
		return s.Status == flotillav1.ClusterRunning && s.ID == "first-uid"
	})
	api.setUID("rebuilt-uid")
	waitFor(t, r, "eu", "IdentityChanged", identityChanged)
	expectUnusable(t, r, "eu", "first-uid")
	// The old cluster back behind the URL: usable again, as it was.
	api.setUID("first-uid")
	waitFor(t, r, "eu", "Running again", func(s Snapshot) bool { return s.Status == flotillav1.ClusterRunning })
	if _, ok := r.Secondary("eu"); !ok {
		t.Error("the pinned cluster answering again is not usable")
	}
}

// Claims start from the known IDs: a second context for a known secondary that answers first
// (the known one is down, or slower) is the duplicate, not the known one.
func TestClaimsAreSeededFromTheKnownIDs(t *testing.T) {
	api := newFakeAPIServer(t, "eu-uid")
	r := startRegistry(t, Options{KnownIDs: map[string]string{"eu": "eu-uid"}},
		registration(t, map[string]string{"eu": "https://127.0.0.1:1", "again": api.URL}))
	s := waitFor(t, r, "again", "DuplicateCluster", func(s Snapshot) bool { return s.Reason == flotillav1.ReasonDuplicateCluster })
	if !strings.Contains(s.Message, "eu") {
		t.Errorf("duplicate message %q does not name eu", s.Message)
	}
}
