package apicalls

import "testing"

func TestClassifyNamesVerbAndResourceNeverTheObject(t *testing.T) {
	tests := []struct {
		method, path, watch string
		verb, resource      string
	}{
		{"PATCH", "/api/v1/namespaces/shop/pods/web-1/status", "", "patch", "pods/status"},
		{"GET", "/api/v1/namespaces/shop/pods/web-1", "", "get", "pods"},
		{"GET", "/api/v1/namespaces/shop/pods", "", "list", "pods"},
		{"GET", "/api/v1/pods", "true", "watch", "pods"},
		{"POST", "/apis/events.k8s.io/v1/namespaces/shop/events", "", "create", "events"},
		{"DELETE", "/api/v1/namespaces/shop/pods/web-1", "", "delete", "pods"},
		{"DELETE", "/api/v1/namespaces/shop/pods", "", "deletecollection", "pods"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/flotilla-system/leases/flotilla", "", "update", "leases"},
		{"GET", "/api/v1/namespaces/shop", "", "get", "namespaces"},
		{"POST", "/api/v1/namespaces", "", "create", "namespaces"},
		{"POST", "/api/v1/namespaces/shop/pods/web-1/eviction", "", "create", "pods/eviction"},
		{"GET", "/api/v1/nodes/n1/proxy/stats/summary", "", "get", "nodes/proxy"},
		{"GET", "/healthz", "", "get", "(healthz)"},
		{"GET", "/apis/apps/v1", "", "get", "(apis)"},
	}
	for _, tc := range tests {
		verb, resource := Classify(tc.method, tc.path, tc.watch)
		if verb != tc.verb || resource != tc.resource {
			t.Errorf("%s %s: %s %s, want %s %s", tc.method, tc.path, verb, resource, tc.verb, tc.resource)
		}
	}
}
