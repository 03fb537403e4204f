package kubeletapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	httpspdy "k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

type fakeIO struct {
	stdin          io.Reader
	stdout, stderr io.WriteCloser
	tty            bool
}

func (f fakeIO) Stdin() io.Reader            { return f.stdin }
func (f fakeIO) Stdout() io.WriteCloser      { return f.stdout }
func (f fakeIO) Stderr() io.WriteCloser      { return f.stderr }
func (f fakeIO) TTY() bool                   { return f.tty }
func (f fakeIO) Resize() <-chan api.TermSize { return nil }

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func TestContainerStreamURL(t *testing.T) {
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: "https://eu.example:6443"})
	if err != nil {
		t.Fatal(err)
	}
	rc := cs.CoreV1().RESTClient()
	streams := fakeIO{stdin: strings.NewReader(""), stdout: nopWriteCloser{io.Discard}, tty: true}

	exec := containerStreamURL(rc, subresourceExec, "ns", "web", "app", []string{"sh", "-c", "id"}, streams)
	if exec.Path != "/api/v1/namespaces/ns/pods/web/exec" {
		t.Errorf("exec path = %s", exec.Path)
	}
	q := exec.Query()
	if got := q["command"]; len(got) != 3 || got[2] != "id" {
		t.Errorf("exec command = %v", got)
	}
	if q.Get("container") != "app" || q.Get("stdin") != "true" || q.Get("stdout") != "true" || q.Get("tty") != "true" || q.Has("stderr") {
		t.Errorf("exec query = %v", q)
	}

	attach := containerStreamURL(rc, subresourceAttach, "ns", "web", "app", nil, fakeIO{stderr: nopWriteCloser{io.Discard}})
	if attach.Path != "/api/v1/namespaces/ns/pods/web/attach" {
		t.Errorf("attach path = %s", attach.Path)
	}
	q = attach.Query()
	if q.Has("command") || q.Has("stdin") || q.Has("tty") || q.Get("stderr") != "true" || q.Get("container") != "app" {
		t.Errorf("attach query = %v", q)
	}
}

// clientConn is the kubectl side of one forwarded connection: it sends in, then half-closes.
type clientConn struct {
	io.Reader
	mu  sync.Mutex
	out bytes.Buffer
}

func (c *clientConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}

func (c *clientConn) Close() error { return nil }

func (c *clientConn) received() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

type secondariesMap map[string]clusters.Secondary

func (s secondariesMap) PrimaryID() string { return "primary-1" }

// delegateOfWeb is this primary's delegate of the proxy ns/web in the fake secondary.
func delegateOfWeb() *corev1.Pod {
	return &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web",
			Labels:      map[string]string{flotillav1.LabelPrimary: "primary-1"},
			Annotations: map[string]string{flotillav1.AnnotationProxyUID: "proxy-uid-1"}}}
}

func (s secondariesMap) Secondary(name string) (clusters.Secondary, bool) {
	sec, ok := s[name]
	return sec, ok
}

// fakeSecondaryKubelet serves pods/portforward of ns/web as the secondary's API server and kubelet
// would: it reads the data stream to its end, then answers "pong:<what it read>", or, with
// failWith, reports that on the error stream.
func fakeSecondaryKubelet(t *testing.T, failWith string, port chan<- string, delegate *corev1.Pod) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/ns/pods/web" {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(delegate)
			return
		}
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/namespaces/ns/pods/web/portforward" {
			http.NotFound(w, r)
			return
		}
		if _, err := httpstream.Handshake(r, w, []string{portforward.PortForwardProtocolV1Name}); err != nil {
			return
		}
		streams := make(chan httpstream.Stream, 2)
		conn := httpspdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, _ <-chan struct{}) error {
			streams <- s
			return nil
		})
		if conn == nil {
			return
		}
		defer func() { _ = conn.Close() }()
		byType := map[string]httpstream.Stream{}
		for len(byType) < 2 {
			select {
			case s := <-streams:
				byType[s.Headers().Get(corev1.StreamType)] = s
			case <-time.After(5 * time.Second):
				return
			}
		}
		data, errStream := byType[corev1.StreamTypeData], byType[corev1.StreamTypeError]
		port <- data.Headers().Get(corev1.PortHeader)
		in, _ := io.ReadAll(data)
		if failWith != "" {
			_, _ = errStream.Write([]byte(failWith))
		} else {
			_, _ = data.Write([]byte("pong:" + string(in)))
		}
		// As the kubelet does: the error stream closes first.
		_ = errStream.Close()
		_ = data.Close()
		select {
		case <-conn.CloseChan():
		case <-time.After(5 * time.Second):
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func kubeletFor(t *testing.T, secondary *httptest.Server) *Server {
	cfg := &rest.Config{Host: secondary.URL}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	primary := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "proxy-uid-1"},
		Spec: corev1.PodSpec{NodeName: "flotilla-eu"}})
	return &Server{Primary: primary,
		Secondaries: secondariesMap{"eu": {Name: "eu", Clientset: cs, Config: cfg}}}
}

func TestPortForwardHalfClose(t *testing.T) {
	port := make(chan string, 1)
	k := kubeletFor(t, fakeSecondaryKubelet(t, "", port, delegateOfWeb()))
	client := &clientConn{Reader: strings.NewReader("ping")}
	// Bounded: without the half-close, neither side would ever end.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := k.portForward(ctx, "ns", "web", 8080, client); err != nil {
		t.Fatal(err)
	}
	if got := <-port; got != "8080" {
		t.Errorf("port header = %q", got)
	}
	if got := client.received(); got != "pong:ping" {
		t.Errorf("received %q, want the answer sent after the client's half-close", got)
	}
}

func TestPortForwardRemoteError(t *testing.T) {
	k := kubeletFor(t, fakeSecondaryKubelet(t, "connection refused", make(chan string, 1), delegateOfWeb()))
	err := k.portForward(t.Context(), "ns", "web", 8080, &clientConn{Reader: strings.NewReader("ping")})
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "in eu") {
		t.Errorf("err = %v", err)
	}
}

func TestPortForwardNotOnVirtualNode(t *testing.T) {
	k := &Server{Primary: fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.PodSpec{NodeName: "worker-1"}}), Secondaries: secondariesMap{}}
	if err := k.portForward(t.Context(), "ns", "web", 8080, &clientConn{Reader: strings.NewReader("")}); err == nil {
		t.Error("want an error for a pod that is not a proxy")
	}
}

func TestStreamsOnlyFromTheProxysOwnDelegate(t *testing.T) {
	foreign := delegateOfWeb()
	foreign.Labels = nil // the secondary's own pod of the same name
	other := delegateOfWeb()
	other.Annotations[flotillav1.AnnotationProxyUID] = "an-earlier-incarnation"
	for name, pod := range map[string]*corev1.Pod{"unlabelled": foreign, "another proxy's": other} {
		k := kubeletFor(t, fakeSecondaryKubelet(t, "", make(chan string, 1), pod))
		err := k.portForward(t.Context(), "ns", "web", 8080, &clientConn{Reader: strings.NewReader("ping")})
		if !errdefs.IsNotFound(err) {
			t.Errorf("%s pod: %v, want NotFound (404)", name, err)
		}
	}
}

func TestAttributesAskForTheProxysOwnRightsOfDirectCallers(t *testing.T) {
	tests := map[string]struct {
		path      string
		apiServer bool
		want      authorizationv1.ResourceAttributes
	}{
		"exec by the API server": {"/exec/ns/web/c", true,
			authorizationv1.ResourceAttributes{Verb: "create", Resource: "nodes", Subresource: "proxy", Name: "flotilla-eu"}},
		"exec by a token, whatever the method": {"/exec/ns/web/c", false,
			authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Subresource: "exec", Namespace: "ns", Name: "web"}},
		"port-forward by a token": {"/portForward/ns/web", false,
			authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Subresource: "portforward", Namespace: "ns", Name: "web"}},
		"logs by a token": {"/containerLogs/ns/web/c", false,
			authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods", Subresource: "log", Namespace: "ns", Name: "web"}},
		"logs by the API server": {"/containerLogs/ns/web/c", true,
			authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "proxy", Name: "flotilla-eu"}},
	}
	for name, tc := range tests {
		tgt, err := parseTarget(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := tgt.attributes("flotilla-eu", tc.apiServer); got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
}
