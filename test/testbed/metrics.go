package testbed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
)

// Every cluster of the bed serves metrics.k8s.io, from a metrics-server (built from the module
// proxy by `make tools`) that runs on the host and scrapes the cluster's nodes:
//   - in a secondary, kwok's fake nodes, which emulate the kubelet's /metrics/resource (kwok's own
//     Metric object) with the usage ClusterResourceUsage gives each pod: the pod's annotations
//     kwok.x-k8s.io/usage-cpu and kwok.x-k8s.io/usage-memory, else 1m and 1Mi;
//   - in the primary, Flotilla's virtual nodes (and the real node, when there is one).
//
// The API servers reach it as an aggregated API at the host's address (EndpointSlice, aggregator
// routing on): the bed has no kube-proxy but on the real node.

// AnnotationUsageCPU and AnnotationUsageMemory set what a secondary's pod uses, as its metrics
// API reports it.
const (
	AnnotationUsageCPU    = "kwok.x-k8s.io/usage-cpu"
	AnnotationUsageMemory = "kwok.x-k8s.io/usage-memory"
)

// MetricsResolution is how often each cluster's metrics-server scrapes its nodes (its minimum).
const MetricsResolution = 10 * time.Second

// metricsServerVersionKey names the version `make tools` builds in test/tools/versions.env.
const metricsServerVersionKey = "METRICS_SERVER_VERSION"

const (
	metricsServerName   = "metrics-server"
	metricsAPIService   = "v1beta1.metrics.k8s.io"
	resourceMetricsPath = "metrics.k8s.io/resource-metrics-path"
)

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// usageExpression is the CEL expression of one resource of ClusterResourceUsage.
func usageExpression(annotation, fallback string) string {
	return fmt.Sprintf("%q in pod.metadata.annotations ? Quantity(pod.metadata.annotations[%q]) : Quantity(%q)", annotation, annotation, fallback)
}

// metricsObjects are the kwok objects of a secondary's emulated resource metrics.
func metricsObjects(toolsDir string) ([]*unstructured.Unstructured, error) {
	f := filepath.Join(toolsDir, "metrics", "metrics-resource.yaml")
	raw, err := os.ReadFile(f)
	if err != nil {
		return nil, fmt.Errorf("reading kwok's Metric (run `make tools`): %w", err)
	}
	objs, err := decodeYAML(raw)
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", f, err)
	}
	usage := kwokObject("ClusterResourceUsage", "testbed-usage", map[string]any{
		"usages": []any{map[string]any{"usage": map[string]any{
			"cpu":    map[string]any{"expression": usageExpression(AnnotationUsageCPU, "1m")},
			"memory": map[string]any{"expression": usageExpression(AnnotationUsageMemory, "1Mi")},
		}}},
	})
	return append(objs, usage), nil
}

// metricsServerPIDFile is where the bed records a cluster's metrics-server, beside kwokctl's own
// PID files: stopping or deleting the cluster stops it too, and PIDs lists it.
func metricsServerPIDFile(clusterDir string) string {
	return filepath.Join(clusterDir, "pids", metricsServerName+".pid")
}

// startMetricsServer starts a cluster's metrics-server and registers it as the cluster's
// metrics.k8s.io; it returns once the API server reports the APIService Available.
func (b *Bed) startMetricsServer(ctx context.Context, c *Cluster) error {
	hostIP, err := HostIP()
	if err != nil {
		return fmt.Errorf("the host's address, where the API server reaches metrics-server: %w", err)
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	version, err := toolVersion(metricsServerVersionKey)
	if err != nil {
		return err
	}
	bin := filepath.Join(b.tools.toolsDir, metricsServerName+"-"+version)
	certDir := filepath.Join(c.dir, metricsServerName)
	args := []string{
		"--kubeconfig=" + c.KubeconfigPath,
		"--authentication-kubeconfig=" + c.KubeconfigPath,
		"--authorization-kubeconfig=" + c.KubeconfigPath,
		"--bind-address=" + hostIP.String(), "--secure-port=" + strconv.Itoa(port), "--cert-dir=" + certDir,
		// Fake nodes answer at localhost (their Hostname), virtual and real nodes at their InternalIP,
		// each at its own port; their serving certificates are self-signed.
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--kubelet-use-node-status-port", "--kubelet-insecure-tls",
		"--metric-resolution=" + MetricsResolution.String(), "--kubelet-request-timeout=5s",
	}
	pid, err := StartDaemon(metricsServerName+"-"+c.Name, bin, args, filepath.Join(c.dir, "logs", metricsServerName+".log"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(metricsServerPIDFile(c.dir), []byte(strconv.Itoa(pid)), 0o600); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return fmt.Errorf("recording the metrics-server of %s: %w", c.Name, err)
	}
	if err := registerMetricsAPI(ctx, c, hostIP.String(), int32(port)); err != nil {
		return err
	}
	return waitAPIServiceAvailable(ctx, c)
}

// registerMetricsAPI points the cluster's metrics.k8s.io at metrics-server: an APIService, and a
// Service without selector whose EndpointSlice holds the host's address (created again on a
// restart, with the new port).
func registerMetricsAPI(ctx context.Context, c *Cluster, hostIP string, port int32) error {
	ns := metav1.NamespaceSystem
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: metricsServerName, Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(port)}}}}
	if _, err := c.Clientset.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the metrics-server Service in %s: %w", c.Name, err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: metricsServerName, Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: metricsServerName}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{hostIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	slices := c.Clientset.DiscoveryV1().EndpointSlices(ns)
	if err := slices.Delete(ctx, metricsServerName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("replacing the metrics-server EndpointSlice in %s: %w", c.Name, err)
	}
	if _, err := slices.Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the metrics-server EndpointSlice in %s: %w", c.Name, err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return fmt.Errorf("building dynamic client for %s: %w", c.Name, err)
	}
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": metricsAPIService},
		"spec": map[string]any{
			"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": int64(100), "versionPriority": int64(100),
			// metrics-server's certificate is self-signed, as in its own manifests.
			"insecureSkipTLSVerify": true,
			"service":               map[string]any{"name": metricsServerName, "namespace": ns, "port": int64(443)},
		},
	}}
	if _, err := dyn.Resource(apiServiceGVR).Create(ctx, apiService, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the metrics.k8s.io APIService in %s: %w", c.Name, err)
	}
	return nil
}

// waitAPIServiceAvailable waits until the API server reaches metrics-server.
func waitAPIServiceAvailable(ctx context.Context, c *Cluster) error {
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return fmt.Errorf("building dynamic client for %s: %w", c.Name, err)
	}
	last := "not read yet"
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(apiServiceGVR).Get(ctx, metricsAPIService, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, raw := range conds {
			cond, _ := raw.(map[string]any)
			if cond["type"] == "Available" {
				last = fmt.Sprintf("%v: %v", cond["reason"], cond["message"])
				return cond["status"] == "True", nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("metrics.k8s.io of %s not available (%s): %w", c.Name, last, err)
	}
	return nil
}
