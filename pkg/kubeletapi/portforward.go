package kubeletapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

const (
	// portForwardSetupTimeout bounds finding the delegate and dialling its secondary:
	// virtual-kubelet hands the port-forward handler a context that never ends.
	portForwardSetupTimeout = 30 * time.Second
	// remoteErrorWait bounds the wait for the remote kubelet's verdict once the data stream is
	// done. It closes its error stream before its data stream, so this is only hit when it hangs.
	remoteErrorWait = 5 * time.Second
)

// portForward forwards one connection of `kubectl port-forward` to the same port of the delegate,
// through the secondary's pods/portforward subresource. Each connection gets its own upstream
// connection: virtual-kubelet calls this once per stream pair and gives no handle on the client
// connection they share.
func (k *Server) portForward(ctx context.Context, namespace, pod string, port int32, stream io.ReadWriteCloser) error {
	sec, conn, err := k.dialDelegate(ctx, namespace, pod)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if err := forwardPort(ctx, conn, port, stream); err != nil {
		return fmt.Errorf("port %d of %s/%s in %s: %w", port, namespace, pod, sec.Name, err)
	}
	return nil
}

// dialDelegate finds the secondary of a proxy's delegate and opens a port-forward connection to
// the delegate there, within portForwardSetupTimeout.
func (k *Server) dialDelegate(ctx context.Context, namespace, pod string) (clusters.Secondary, httpstream.Connection, error) {
	setup, cancel := context.WithTimeout(ctx, portForwardSetupTimeout)
	defer cancel()
	sec, err := k.secondaryOf(setup, namespace, pod)
	if err != nil {
		return clusters.Secondary{}, nil, err
	}
	conn, err := dialPortForward(setup, sec, namespace, pod)
	return sec, conn, err
}

// dialPortForward opens an SPDY connection to a pod's pods/portforward subresource. ctx bounds the
// dial and upgrade only; the connection outlives it.
func dialPortForward(ctx context.Context, sec clusters.Secondary, namespace, pod string) (httpstream.Connection, error) {
	transport, upgrader, err := spdyRoundTripperFor(sec.Config)
	if err != nil {
		return nil, fmt.Errorf("port-forward transport for %s: %w", sec.Name, err)
	}
	u := sec.Clientset.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("portforward").URL()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("port-forward request for %s: %w", sec.Name, err)
	}
	conn, protocol, err := spdy.Negotiate(upgrader, &http.Client{Transport: transport}, req, portforward.PortForwardProtocolV1Name)
	if err != nil {
		return nil, fmt.Errorf("port-forward to %s/%s in %s: %w", namespace, pod, sec.Name, err)
	}
	if protocol != portforward.PortForwardProtocolV1Name {
		_ = conn.Close()
		return nil, fmt.Errorf("port-forward to %s/%s in %s: server chose protocol %q", namespace, pod, sec.Name, protocol)
	}
	return conn, nil
}

// forwardPort forwards client over a new stream pair of conn, as kubectl does: the remote kubelet
// reports failures on the error stream and carries the bytes on the data stream.
func forwardPort(ctx context.Context, conn httpstream.Connection, port int32, client io.ReadWriter) error {
	headers := http.Header{}
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	headers.Set(corev1.PortHeader, strconv.Itoa(int(port)))
	// The remote kubelet pairs streams by request ID; this connection carries one pair.
	headers.Set(corev1.PortForwardRequestIDHeader, "0")
	errorStream, err := conn.CreateStream(headers)
	if err != nil {
		return fmt.Errorf("creating the error stream: %w", err)
	}
	// Only the remote side writes on the error stream.
	_ = errorStream.Close()
	remoteErr := make(chan error, 1)
	go func() { remoteErr <- readRemoteError(errorStream) }()

	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(headers)
	if err != nil {
		return fmt.Errorf("creating the data stream: %w", err)
	}
	copyErr := copyBoth(ctx, data, client)
	// Reset discards unsent data, which would otherwise keep the remote side (and so its error
	// stream) from finishing.
	_ = data.Reset()
	select {
	case err := <-remoteErr:
		if err != nil {
			return err
		}
	case <-time.After(remoteErrorWait):
	case <-ctx.Done():
	}
	return copyErr
}

// readRemoteError returns what the remote kubelet wrote on the error stream, nil if nothing.
func readRemoteError(errorStream io.Reader) error {
	msg, err := io.ReadAll(errorStream)
	switch {
	case err != nil:
		return fmt.Errorf("reading the error stream: %w", err)
	case len(msg) > 0:
		return errors.New(string(msg))
	}
	return nil
}

// copyBoth copies between the upstream data stream and the client until the pod's side ends,
// copying to the pod fails, or ctx ends. The client ending its side is passed on as a half-close,
// so the pod can still answer, as with TCP.
func copyBoth(ctx context.Context, upstream httpstream.Stream, client io.ReadWriter) error {
	fromPod := make(chan error, 1)
	go func() {
		_, err := io.Copy(client, upstream)
		fromPod <- err
	}()
	toPod := make(chan error, 1)
	go func() {
		_, err := io.Copy(upstream, client)
		_ = upstream.Close()
		if err != nil {
			toPod <- err
		}
	}()
	select {
	case err := <-fromPod:
		if err != nil {
			return fmt.Errorf("copying from the pod: %w", err)
		}
		return nil
	case err := <-toPod:
		return fmt.Errorf("copying to the pod: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	}
}
