package kubeletapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/internal/clientca"
	"github.com/flotilla-dev/flotilla/internal/clocks"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/logging"
	"github.com/flotilla-dev/flotilla/pkg/pki"
)

// Secondaries gives the kubelet API the secondary a delegate runs in.
type Secondaries interface {
	Secondary(name string) (clusters.Secondary, bool)
	PrimaryID() string
}

// Server is the kubelet API of every virtual node, each at the port its Node advertises
// (status.daemonEndpoints.kubeletEndpoint.Port, given by package virtualnode from Ports): the
// API server's node proxy and metrics-server reach a node's /pods, /runningpods/, /healthz,
// /stats/summary and /metrics/resource there, and kubectl logs, exec, attach and port-forward
// on a proxy reach its delegate. Callers are authenticated by client certificate (the API
// server's, against the cluster's client CA) or bearer token (TokenReview), and authorised by
// SubjectAccessReview (see authenticated). Anonymous callers are refused. Both reviews are cached
// as a kubelet caches them, and at most MaxInFlight requests wait on a review at once: past that
// they are refused with 429.
//
// Each port's serving certificate comes from the cluster's CSR API (signer
// kubernetes.io/kubelet-serving, approved by the server itself: ApproveServingCSR), else, while
// the cluster cannot sign, from a CA of the process's own (said in a log line and an Event on the
// node).
type Server struct {
	// Primary is the kubelet API's own client of the primary (NewPrimaryClient), never the one the
	// virtual nodes' Leases are renewed with: what callers make it do must not delay a renewal.
	Primary     kubernetes.Interface
	Secondaries Secondaries
	// Nodes reads the primary's virtual Node objects (the manager's cache): which port serves
	// which node.
	Nodes client.Reader
	// Ports is the range the nodes' ports are given from; a node advertising another is not served.
	Ports PortRange
	// BindHost is the address the ports are bound on; empty: all.
	BindHost string
	// Address is the InternalIP the virtual nodes advertise: the serving certificates' IP SAN.
	Address string
	// Recorder writes the Events on virtual nodes (a serving certificate not signed by the cluster).
	Recorder events.EventRecorder
	Log      logr.Logger
	// Clock tells the caches of reviews when their entries expire, the serving certificates'
	// validity and renewal, and the usage rates (default: the real one).
	Clock clock.PassiveClock
	// MaxInFlight bounds the requests waiting on a review at once (default DefaultMaxInFlight).
	MaxInFlight int
	// SignTimeout is how long a serving certificate's CSR may wait for its certificate before
	// the node is served with a self-signed one (default DefaultSignTimeout).
	SignTimeout time.Duration

	// usage keeps the CPU counters of the virtual nodes' resource metrics between scrapes.
	usage *usageMeter
	// changed says the Node objects changed (NodesChanged).
	changedOnce sync.Once
	changed     chan struct{}
	// self is the manager's user name, read once (SelfSubjectReview).
	self selfName
}

// now is the server's clock.
func (k *Server) now() time.Time { return clocks.Now(k.Clock) }

// NeedLeaderElection says no: every replica serves the kubelet API.
func (k *Server) NeedLeaderElection() bool { return false }

// NodesChanged tells the server that virtual Node objects changed (a port given or taken back):
// it opens and closes its ports at once instead of at the next resync. It never blocks.
func (k *Server) NodesChanged() {
	select {
	case k.changedCh() <- struct{}{}:
	default:
	}
}

func (k *Server) changedCh() chan struct{} {
	k.changedOnce.Do(func() { k.changed = make(chan struct{}, 1) })
	return k.changed
}

// Start serves until ctx ends: one TLS port per virtual node.
func (k *Server) Start(ctx context.Context) error {
	cas, read := &clientca.Pool{}, clientca.FromCluster(k.Primary)
	if err := cas.Reload(ctx, read); err != nil {
		return err
	}
	go cas.KeepReloaded(ctx, read, clientca.ReloadEvery, k.Log)
	fallback, err := pki.NewCA("flotilla-kubelet-ca", k.now(), 5*365*24*time.Hour)
	if err != nil {
		return err
	}
	k.usage = newUsageMeter()
	r := http.NewServeMux()
	// virtual-kubelet hands port-forward these two timeouts swapped (idle 30 s); forwards still
	// stay open because kubectl pings its connection every 5-10 s. /pods and the node's other
	// endpoints never reach it (admit serves them).
	api.AttachPodRoutes(api.PodHandlerConfig{
		GetContainerLogs: k.containerLogs, RunInContainer: k.runInContainer,
		AttachToContainer: k.attachToContainer, PortForward: k.portForward,
		StreamIdleTimeout: 30 * time.Minute, StreamCreationTimeout: 30 * time.Second,
	}, r, false)
	l := &listeners{k: k, handler: k.authenticated(r), cas: cas, fallback: fallback, open: map[int32]*nodeListener{}}
	k.Log.Info("Serving the virtual nodes' kubelet API", "firstPort", k.Ports.First, "ports", k.Ports.Count, "address", k.Address)
	l.run(ctx)
	return nil
}

// caller is who sent a request: the API server proxying a user it has already authorised
// (client certificate), or a direct caller (bearer token, reviewed).
type caller struct {
	user, uid string
	groups    []string
	extra     map[string]authorizationv1.ExtraValue
	apiServer bool
}

// authenticated authenticates and authorises every request before the kubelet handlers run.
// The API server (client certificate) needs nodes/proxy on the proxy's node, with verb create for
// exec, attach and port-forward whatever the HTTP method (a GET websocket upgrade is still an
// exec). A direct caller needs what it would need on the proxy itself through the API server:
// create pods/exec, pods/attach or pods/portforward, or get pods/log, on that pod.
//
// Reviews are cached (see gate) and the proxy is read only once the caller is authorised, so that
// what an unauthorised caller costs the primary is one TokenReview per token in tokenCacheTTL.
func (k *Server) authenticated(next http.Handler) http.Handler {
	return k.admitWith(newGate(k.Primary, k.Clock, k.MaxInFlight, k.Log), next)
}

// admitWith is authenticated with the given gate.
func (k *Server) admitWith(g *gate, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := &slot{g: g}
		proxy, ok := k.admit(w, r, g, s)
		s.release() // before streaming, which may last hours
		if !ok {
			return
		}
		if proxy == nil {
			return // a node's endpoint, served
		}
		// The handlers find the proxy here (but port-forward, whose context virtual-kubelet does
		// not derive from the request's: it reads it again).
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), proxyKey{}, proxy)))
	})
}

// admit authenticates and authorises r for the node of the port it came to. It serves the
// node's own endpoints itself (and returns no proxy); for a pod request it returns the proxy,
// read once the caller is authorised and which must be on that node. When it returns false it
// has answered the request.
func (k *Server) admit(w http.ResponseWriter, r *http.Request, g *gate, s *slot) (*corev1.Pod, bool) {
	who, err := g.authenticate(r, s)
	if err != nil {
		refuse(w, err, "Unauthorized", http.StatusUnauthorized)
		if !errors.Is(err, errUnauthenticated) && !errors.Is(err, errBusy) {
			g.log.V(logging.Debug).Info("Authentication failed", "error", err.Error())
		}
		return nil, false
	}
	node := nodeOf(r.Context())
	target, err := parseTarget(r.URL.Path)
	if ep := endpointOf(r.URL.Path); ep != endpointNone || err != nil {
		// The node's own endpoints, and whatever else a kubelet would authorise as nodes/...
		if k.authorize(w, r, g, s, who, kubeletAttributes(r.Method, r.URL.Path, node)...) {
			k.serveNode(w, r, node, ep)
		}
		return nil, false
	}
	if who.apiServer {
		// The API server's right is on the node, which the port names.
		if !k.authorize(w, r, g, s, who, target.attributes(node, true)) {
			return nil, false
		}
	} else if !k.authorize(w, r, g, s, who, target.attributes("", false)) {
		// A direct caller's rights are on the pod the URL names: authorised before the pod is read.
		return nil, false
	}
	// No slot for this read: callers who hold a slot are the ones the primary has not yet vouched
	// for, and an authorised caller must not be refused because a flood holds them all.
	proxy, err := k.proxyOf(r.Context(), target)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return nil, false
	}
	if proxy.Spec.NodeName != node {
		// A kubelet serves its own pods only.
		http.Error(w, fmt.Sprintf("pod %s/%s is not on node %s", target.namespace, target.pod, node), http.StatusNotFound)
		return nil, false
	}
	return proxy, true
}

// refuse answers a request refused for err: 429 when the primary is too busy to ask, else code.
func refuse(w http.ResponseWriter, err error, message string, code int) {
	if errors.Is(err, errBusy) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "Too many requests: "+errBusy.Error(), http.StatusTooManyRequests)
		return
	}
	http.Error(w, message, code)
}

// authorize asks the primary (or the cache of its answers) whether the caller may do what one of
// attrs says, in order (a kubelet's fine-grained authorisation falls back to nodes/proxy); when
// not, it answers the request and returns false.
func (k *Server) authorize(w http.ResponseWriter, r *http.Request, g *gate, s *slot, who caller, attrs ...authorizationv1.ResourceAttributes) bool {
	for _, a := range attrs {
		ok, err := g.allowed(r.Context(), who, a, s)
		if err != nil {
			refuse(w, err, "authorization failed", http.StatusInternalServerError)
			if !errors.Is(err, errBusy) {
				g.log.V(logging.Debug).Info("Authorization failed", "user", who.user, "error", err.Error())
			}
			return false
		}
		if ok {
			return true
		}
	}
	var what []string
	for _, a := range attrs {
		what = append(what, a.Resource+"/"+a.Subresource)
	}
	name := attrs[0].Name
	if attrs[0].Namespace != "" {
		name = attrs[0].Namespace + "/" + name
	}
	http.Error(w, fmt.Sprintf("Forbidden: %s may not %s %s %s", who.user, attrs[0].Verb, strings.Join(what, " or "), name), http.StatusForbidden)
	return false
}

// proxyKey carries the proxy read by authenticated to the handlers.
type proxyKey struct{}

// target is what a kubelet API request names: /{verb}/{namespace}/{pod}/...
type target struct {
	verb, namespace, pod string
}

func parseTarget(path string) (target, error) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) < 3 {
		return target{}, errors.New("not a pod request")
	}
	switch parts[0] {
	case "containerLogs", "exec", "attach", "portForward":
		return target{verb: parts[0], namespace: parts[1], pod: parts[2]}, nil
	}
	return target{}, errors.New("not a pod request")
}

// attributes are what a caller must be allowed: see authenticated.
func (t target) attributes(node string, apiServer bool) authorizationv1.ResourceAttributes {
	verb, sub := "create", ""
	switch t.verb {
	case "exec":
		sub = "exec"
	case "attach":
		sub = "attach"
	case "portForward":
		sub = "portforward"
	default: // containerLogs and anything read-only
		verb, sub = "get", "log"
	}
	if apiServer {
		return authorizationv1.ResourceAttributes{Verb: verb, Resource: "nodes", Subresource: "proxy", Name: node}
	}
	return authorizationv1.ResourceAttributes{Verb: verb, Resource: "pods", Subresource: sub, Namespace: t.namespace, Name: t.pod}
}

// proxyOf reads the proxy a request names, which must be on a virtual node.
func (k *Server) proxyOf(ctx context.Context, t target) (*corev1.Pod, error) {
	rctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	pod, err := k.Primary.CoreV1().Pods(t.namespace).Get(rctx, t.pod, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", t.namespace, t.pod, err)
	}
	if _, ok := flotillav1.ClusterOfNode(pod.Spec.NodeName); !ok {
		return nil, fmt.Errorf("pod %s/%s is not on a virtual node", t.namespace, t.pod)
	}
	return pod, nil
}

// secondaryOf returns the secondary running the delegate of a proxy, after checking, live, that
// the pod of that name there is this proxy's delegate: this primary's label and the proxy's UID.
// Anything else (a same-named pod of the secondary's own, another incarnation's delegate) is
// NotFound (404): the kubelet API never streams from a pod that is not the proxy's delegate.
func (k *Server) secondaryOf(ctx context.Context, namespace, name string) (clusters.Secondary, error) {
	proxy, ok := ctx.Value(proxyKey{}).(*corev1.Pod)
	if !ok || proxy.Namespace != namespace || proxy.Name != name {
		var err error
		if proxy, err = k.Primary.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return clusters.Secondary{}, errdefs.AsNotFound(fmt.Errorf("pod %s/%s: %w", namespace, name, err))
		}
	}
	cluster, ok := flotillav1.ClusterOfNode(proxy.Spec.NodeName)
	if !ok {
		return clusters.Secondary{}, errdefs.NotFoundf("pod %s/%s is not on a virtual node", namespace, name)
	}
	sec, ok := k.Secondaries.Secondary(cluster)
	if !ok {
		return clusters.Secondary{}, fmt.Errorf("secondary %s is not usable", cluster)
	}
	delegate, err := sec.Clientset.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return clusters.Secondary{}, errdefs.NotFoundf("pod %s/%s has no delegate in %s", namespace, name, cluster)
		}
		return clusters.Secondary{}, fmt.Errorf("reading the delegate of %s/%s in %s: %w", namespace, name, cluster, err)
	}
	if !IsDelegateOf(delegate, proxy, k.Secondaries.PrimaryID()) {
		return clusters.Secondary{}, errdefs.NotFoundf("pod %s/%s has no delegate in %s", namespace, name, cluster)
	}
	return sec, nil
}

// IsDelegateOf says whether a pod of a secondary is this primary's delegate of that proxy.
func IsDelegateOf(pod, proxy *corev1.Pod, primaryID string) bool {
	return primaryID != "" && pod.Labels[flotillav1.LabelPrimary] == primaryID &&
		pod.Annotations[flotillav1.AnnotationProxyUID] == string(proxy.UID) && proxy.UID != ""
}

func (k *Server) containerLogs(ctx context.Context, namespace, pod, container string, o api.ContainerLogOpts) (io.ReadCloser, error) {
	sec, err := k.secondaryOf(ctx, namespace, pod)
	if err != nil {
		return nil, err
	}
	opts := &corev1.PodLogOptions{Container: container, Follow: o.Follow, Previous: o.Previous, Timestamps: o.Timestamps}
	if o.Tail > 0 {
		t := int64(o.Tail)
		opts.TailLines = &t
	}
	if o.LimitBytes > 0 {
		l := int64(o.LimitBytes)
		opts.LimitBytes = &l
	}
	if o.SinceSeconds > 0 {
		s := int64(o.SinceSeconds)
		opts.SinceSeconds = &s
	}
	if !o.SinceTime.IsZero() {
		t := metav1.NewTime(o.SinceTime)
		opts.SinceTime = &t
	}
	return sec.Clientset.CoreV1().Pods(namespace).GetLogs(pod, opts).Stream(ctx)
}

// Pod subresources that connect a caller to a container's stdio (remotecommand protocol).
const (
	subresourceExec   = "exec"
	subresourceAttach = "attach"
)

func (k *Server) runInContainer(ctx context.Context, namespace, pod, container string, cmd []string, attach api.AttachIO) error {
	return k.streamContainer(ctx, subresourceExec, namespace, pod, container, cmd, attach)
}

func (k *Server) attachToContainer(ctx context.Context, namespace, pod, container string, attach api.AttachIO) error {
	return k.streamContainer(ctx, subresourceAttach, namespace, pod, container, nil, attach)
}

// streamContainer connects the caller to the delegate's container through the secondary's exec or
// attach subresource.
func (k *Server) streamContainer(ctx context.Context, subresource, namespace, pod, container string, cmd []string, attach api.AttachIO) error {
	sec, err := k.secondaryOf(ctx, namespace, pod)
	if err != nil {
		return err
	}
	u := containerStreamURL(sec.Clientset.CoreV1().RESTClient(), subresource, namespace, pod, container, cmd, attach)
	transport, upgrader, err := spdyRoundTripperFor(sec.Config)
	if err != nil {
		return fmt.Errorf("%s in %s: %w", subresource, sec.Name, err)
	}
	exec, err := remotecommand.NewSPDYExecutorForTransports(transport, upgrader, http.MethodPost, u)
	if err != nil {
		return fmt.Errorf("%s in %s: %w", subresource, sec.Name, err)
	}
	// Not wrapped: virtual-kubelet type-asserts the error (no errors.As) to pass a command's exit
	// code on to kubectl.
	return exec.StreamWithContext(ctx, streamOptions(attach))
}

// containerStreamURL builds the URL of a pod's exec or attach subresource. They differ only in
// their options type (attach runs no command); both ask for exactly the streams the caller opened,
// so that the secondary's kubelet opens the same ones.
func containerStreamURL(rc rest.Interface, subresource, namespace, pod, container string, cmd []string, attach api.AttachIO) *url.URL {
	stdin, stdout, stderr := attach.Stdin() != nil, attach.Stdout() != nil, attach.Stderr() != nil
	var opts runtime.Object = &corev1.PodExecOptions{Container: container, Command: cmd,
		Stdin: stdin, Stdout: stdout, Stderr: stderr, TTY: attach.TTY()}
	if subresource == subresourceAttach {
		opts = &corev1.PodAttachOptions{Container: container, Stdin: stdin, Stdout: stdout, Stderr: stderr, TTY: attach.TTY()}
	}
	return rc.Post().Resource("pods").Namespace(namespace).Name(pod).SubResource(subresource).
		VersionedParams(opts, scheme.ParameterCodec).URL()
}

// streamOptions passes on the caller's streams (nil when not asked for) and, with a terminal, its
// resizes.
func streamOptions(attach api.AttachIO) remotecommand.StreamOptions {
	opts := remotecommand.StreamOptions{Stdin: attach.Stdin(), Stdout: attach.Stdout(), Stderr: attach.Stderr(), Tty: attach.TTY()}
	if attach.TTY() {
		opts.TerminalSizeQueue = sizeQueue(attach.Resize())
	}
	return opts
}

type sizeQueue <-chan api.TermSize

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	s, ok := <-q
	if !ok {
		return nil
	}
	return &remotecommand.TerminalSize{Width: s.Width, Height: s.Height}
}
