package apicalls

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The api_server label's values.
const (
	Primary   = "primary"
	Secondary = "secondary"
)

var requests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "flotilla_api_requests_total",
	Help: "Requests the manager made to an API server: api_server (primary, or secondary for all the secondaries'), verb (get, list, watch, create, update, patch, delete, deletecollection, as the API server's apiserver_request_total says) and resource (resource[/subresource]).",
}, []string{"api_server", "verb", "resource"})

func init() { metrics.Registry.MustRegister(requests) }

// Wrap is a transport wrapper (rest.Config.Wrap) that counts each request to apiServer.
func Wrap(apiServer string) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper { return counted{rt: rt, apiServer: apiServer} }
}

type counted struct {
	rt        http.RoundTripper
	apiServer string
}

func (c counted) RoundTrip(req *http.Request) (*http.Response, error) {
	verb, resource := Classify(req.Method, req.URL.Path, req.URL.Query().Get("watch"))
	requests.WithLabelValues(c.apiServer, verb, resource).Inc()
	return c.rt.RoundTrip(req)
}

// Classify is a request's verb and resource as the API server counts them: the resource with its
// subresource ("pods/status"), never an object's name or namespace, so the labels stay a bounded
// set. A path outside the resource API (/healthz, discovery) is its own resource, without its
// version.
func Classify(method, path, watch string) (verb, resource string) {
	resource, named, ok := Resource(path)
	if !ok {
		return strings.ToLower(method), "(" + strings.SplitN(strings.Trim(path, "/"), "/", 2)[0] + ")"
	}
	switch method {
	case http.MethodGet:
		switch {
		case watch == "true" || watch == "1":
			return "watch", resource
		case named:
			return "get", resource
		}
		return "list", resource
	case http.MethodPost:
		return "create", resource
	case http.MethodPut:
		return "update", resource
	case http.MethodPatch:
		return "patch", resource
	case http.MethodDelete:
		if named {
			return "delete", resource
		}
		return "deletecollection", resource
	}
	return strings.ToLower(method), resource
}

// Resource is the resource a path of the resource API names, with its subresource
// ("pods/status"), and whether it names one object; ok is false for a path outside that API
// (/healthz, /version, discovery).
func Resource(path string) (resource string, named, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "", false, false
	}
	if len(parts) > 2 && parts[0] == "namespaces" {
		parts = parts[2:] // the namespace's objects, not the namespace
	}
	resource = parts[0]
	if len(parts) > 2 {
		resource += "/" + parts[2]
	}
	return resource, len(parts) > 1, true
}
