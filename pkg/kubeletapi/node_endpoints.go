package kubeletapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/logging"
)

// endpoint is one of a node's own endpoints (not a pod's stream).
type endpoint int

const (
	endpointNone endpoint = iota
	// endpointPods is /pods: the node's pods as the primary has them (the kubelet's desired pods).
	endpointPods
	// endpointRunningPods is /runningpods/: the node's pods whose delegate runs, as the kubelet's
	// container runtime reports them.
	endpointRunningPods
	// endpointHealthz is /healthz (and its checks, /healthz/<name>).
	endpointHealthz
	// endpointSummary is /stats/summary, the Summary API.
	endpointSummary
	// endpointResourceMetrics is /metrics/resource, what metrics-server scrapes.
	endpointResourceMetrics
)

// endpointOf names the node endpoint a path asks for (a trailing slash or none, as the kubelet
// and virtual-kubelet route them).
func endpointOf(path string) endpoint {
	path = strings.TrimSuffix(path, "/")
	switch {
	case path == "/pods":
		return endpointPods
	case path == "/runningpods":
		return endpointRunningPods
	case path == "/healthz" || (strings.HasPrefix(path, "/healthz/") && !strings.Contains(path[len("/healthz/"):], "/")):
		return endpointHealthz
	case path == "/stats/summary":
		return endpointSummary
	case path == "/metrics/resource":
		return endpointResourceMetrics
	}
	return endpointNone
}

// kubeletAttributes are what a kubelet with fine-grained authorisation (KubeletFineGrainedAuthz,
// on by default since 1.33) asks of a caller for a request of its own endpoints, in order, any of
// them enough: /pods and /runningpods/ nodes/pods, /healthz nodes/healthz (each else
// nodes/proxy), /stats nodes/stats, /metrics nodes/metrics, /logs nodes/log, anything else
// nodes/proxy; the verb is the method's (pkg/kubelet/server/auth.go).
func kubeletAttributes(method, path, node string) []authorizationv1.ResourceAttributes {
	verb := map[string]string{http.MethodPost: "create", http.MethodGet: "get", http.MethodPut: "update",
		http.MethodPatch: "patch", http.MethodDelete: "delete"}[method]
	var subresources []string
	switch {
	case isSubpath(path, "/pods"), isSubpath(path, "/runningpods"):
		subresources = append(subresources, "pods")
	case isSubpath(path, "/healthz"):
		subresources = append(subresources, "healthz")
	case isSubpath(path, "/configz"):
		subresources = append(subresources, "configz")
	}
	switch {
	case isSubpath(path, "/stats"):
		subresources = append(subresources, "stats")
	case isSubpath(path, "/metrics"):
		subresources = append(subresources, "metrics")
	case isSubpath(path, "/logs"):
		subresources = append(subresources, "log")
	default:
		subresources = append(subresources, "proxy")
	}
	attrs := make([]authorizationv1.ResourceAttributes, 0, len(subresources))
	for _, sub := range subresources {
		attrs = append(attrs, authorizationv1.ResourceAttributes{Verb: verb, Resource: "nodes", Subresource: sub, Name: node})
	}
	return attrs
}

// isSubpath says whether path is prefix or below it, as the kubelet's isSubpath.
func isSubpath(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// serveNode answers one of the node's endpoints, authorised; endpointNone is not found.
func (k *Server) serveNode(w http.ResponseWriter, r *http.Request, node string, ep endpoint) {
	if ep != endpointNone && r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "Method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch ep {
	case endpointHealthz:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	case endpointPods, endpointRunningPods:
		k.servePods(w, r, node, ep == endpointRunningPods)
	case endpointSummary, endpointResourceMetrics:
		k.serveUsage(w, r, node, ep)
	default:
		http.NotFound(w, r)
	}
}

// podListCodec encodes a PodList as the kubelet does (kind PodList, apiVersion v1).
var podListCodec = scheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion)

// servePods answers /pods (every pod bound to the node, as the primary has it) or
// /runningpods/ (those whose delegate runs, see RunningPods).
func (k *Server) servePods(w http.ResponseWriter, r *http.Request, node string, running bool) {
	ctx, cancel := context.WithTimeout(r.Context(), reviewTimeout)
	defer cancel()
	pods, err := k.podsOf(ctx, node)
	if err == nil && running {
		pods, err = k.runningPods(ctx, node, pods)
	}
	if err != nil {
		k.Log.V(logging.Debug).Info("Listing a virtual node's pods failed", "node", node, "running", running, "err", err.Error())
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	list := &corev1.PodList{Items: pods}
	raw, err := runtime.Encode(podListCodec, list)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(raw)
}

// podsOf lists the pods bound to a node in the primary (the API server's watch cache answers).
func (k *Server) podsOf(ctx context.Context, node string) ([]corev1.Pod, error) {
	list, err := k.Primary.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(), ResourceVersion: "0"})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of node %s: %w", node, err)
	}
	return slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.Spec.NodeName != node }), nil
}

// runningPods reads the delegates in the node's secondary and keeps the proxies whose delegate runs.
func (k *Server) runningPods(ctx context.Context, node string, proxies []corev1.Pod) ([]corev1.Pod, error) {
	cluster, _ := flotillav1.ClusterOfNode(node)
	sec, ok := k.Secondaries.Secondary(cluster)
	if !ok {
		return nil, fmt.Errorf("secondary %s is not usable: what runs there is not known", cluster)
	}
	primaryID := k.Secondaries.PrimaryID()
	list, err := sec.Clientset.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{flotillav1.LabelPrimary: primaryID}).String(), ResourceVersion: "0"})
	if err != nil {
		return nil, fmt.Errorf("listing the delegates in %s: %w", cluster, err)
	}
	return RunningPods(proxies, list.Items, primaryID), nil
}

// RunningPods is the kubelet's /runningpods/ of a virtual node: each proxy whose delegate (this
// primary's, of this proxy: IsDelegateOf) has a running container, in the shape of the kubelet's
// runtime pods (kubecontainer.Pod.ToAPIPod): the proxy's UID, name and namespace, and the name
// and image of each running container of the delegate. A proxy without a delegate (one waiting
// for a Secret, say) or whose delegate runs nothing is not listed.
func RunningPods(proxies, delegates []corev1.Pod, primaryID string) []corev1.Pod {
	byKey := make(map[string]*corev1.Pod, len(delegates))
	for i := range delegates {
		byKey[delegates[i].Namespace+"/"+delegates[i].Name] = &delegates[i]
	}
	out := []corev1.Pod{}
	for i := range proxies {
		proxy := &proxies[i]
		d, ok := byKey[proxy.Namespace+"/"+proxy.Name]
		if !ok || !IsDelegateOf(d, proxy, primaryID) {
			continue
		}
		var containers []corev1.Container
		for _, st := range d.Status.ContainerStatuses {
			if st.State.Running == nil {
				continue
			}
			image := st.Image
			if j := slices.IndexFunc(d.Spec.Containers, func(c corev1.Container) bool { return c.Name == st.Name }); j >= 0 {
				image = d.Spec.Containers[j].Image
			}
			containers = append(containers, corev1.Container{Name: st.Name, Image: image})
		}
		if len(containers) == 0 {
			continue
		}
		out = append(out, corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: proxy.UID, Name: proxy.Name, Namespace: proxy.Namespace},
			Spec: corev1.PodSpec{Containers: containers}})
	}
	return out
}

// nodeKey carries, in a request's context, the virtual node whose port it came to.
type nodeKey struct{}

// withNode serves h as the kubelet API of node.
func withNode(node string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), nodeKey{}, node)))
	})
}

// nodeOf is the virtual node a request is for ("" outside withNode).
func nodeOf(ctx context.Context) string {
	n, _ := ctx.Value(nodeKey{}).(string)
	return n
}
