package kubeletapi

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/internal/clientca"
	"github.com/flotilla-dev/flotilla/internal/kubeletports"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/pki"
)

// PortRange is the range the virtual nodes' kubelet ports are given from (kubeletports.Range).
type PortRange = kubeletports.Range

// ServedPorts is which virtual node each port serves: every virtual node (one of Flotilla's,
// labelled with its cluster) advertising a port of r. A port two nodes advertise serves the first
// by name, as package virtualnode gives it (AllocatePorts).
func ServedPorts(nodes []corev1.Node, r PortRange) map[int32]*corev1.Node {
	advertised := map[string]int32{}
	byName := map[string]*corev1.Node{}
	for i := range nodes {
		n := &nodes[i]
		_, virtual := flotillav1.ClusterOfNode(n.Name)
		if _, labelled := n.Labels[flotillav1.LabelCluster]; virtual && labelled {
			advertised[n.Name], byName[n.Name] = n.Status.DaemonEndpoints.KubeletEndpoint.Port, n
		}
	}
	out := map[int32]*corev1.Node{}
	for p, name := range kubeletports.Holders(advertised, r) {
		out[p] = byName[name]
	}
	return out
}

// nodeResync is how often the ports are compared with the Node objects when nothing said they
// changed (Server.NodesChanged).
const nodeResync = 30 * time.Second

// listeners are the server's open ports, one per virtual node.
type listeners struct {
	k        *Server
	handler  http.Handler
	cas      *clientca.Pool
	fallback *pki.CA
	open     map[int32]*nodeListener
}

// nodeListener is one virtual node's port.
type nodeListener struct {
	node   string
	srv    *http.Server
	cancel context.CancelFunc // ends its certificate's renewal
	done   chan struct{}
}

// run keeps one port open per virtual node until ctx ends, then closes them all.
func (l *listeners) run(ctx context.Context) {
	t := time.NewTicker(nodeResync)
	defer t.Stop()
	defer l.closeAll(ctx)
	for {
		l.sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-l.k.changedCh():
		case <-t.C:
		}
	}
}

// sync opens the port of each virtual node that has none and closes those of nodes gone or moved.
func (l *listeners) sync(ctx context.Context) {
	var list corev1.NodeList
	if err := l.k.Nodes.List(ctx, &list, client.HasLabels{flotillav1.LabelCluster}); err != nil {
		if ctx.Err() == nil {
			l.k.Log.Error(err, "Listing the virtual nodes failed; their kubelet ports stay as they are")
		}
		return
	}
	want := ServedPorts(list.Items, l.k.Ports)
	for port, nl := range l.open {
		if n, ok := want[port]; !ok || n.Name != nl.node {
			l.close(ctx, port)
		}
	}
	for port, n := range want {
		if _, ok := l.open[port]; !ok {
			l.start(ctx, port, n)
		}
	}
}

// start opens a node's port: a self-signed certificate at once, the cluster's when it comes.
func (l *listeners) start(ctx context.Context, port int32, node *corev1.Node) {
	log := l.k.Log.WithValues("node", node.Name, "port", port)
	cert, err := l.k.selfSigned(l.fallback, node.Name)
	if err != nil {
		log.Error(err, "Issuing a virtual node's serving certificate failed; its kubelet port stays closed")
		return
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(l.k.BindHost, strconv.Itoa(int(port))))
	if err != nil {
		log.Error(err, "Opening a virtual node's kubelet port failed; tried again at the next resync")
		return
	}
	sc := &servingCert{cert: cert}
	srv := &http.Server{
		Handler:           withNode(node.Name, l.handler),
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12,
			// Per connection, so that a renewed certificate and a rotated client CA are used
			// without a restart.
			GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
				return &tls.Config{Certificates: []tls.Certificate{*sc.get()}, ClientCAs: l.cas.Get(),
					ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}, nil
			}},
	}
	cctx, cancel := context.WithCancel(ctx)
	go l.k.keepCertificate(cctx, node.DeepCopy(), sc)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "Serving a virtual node's kubelet API failed")
		}
	}()
	l.open[port] = &nodeListener{node: node.Name, srv: srv, cancel: cancel, done: done}
	log.Info("Serving a virtual node's kubelet API")
}

// close closes a port: its requests are given 5 s (streams, hijacked, are not waited for).
func (l *listeners) close(ctx context.Context, port int32) {
	nl := l.open[port]
	delete(l.open, port)
	nl.cancel()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = nl.srv.Shutdown(sctx)
	<-nl.done
	l.k.Log.Info("Closed a virtual node's kubelet port", "node", nl.node, "port", port)
}

func (l *listeners) closeAll(ctx context.Context) {
	for port := range l.open {
		l.close(ctx, port)
	}
}
