package kubeletapi

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/pki"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// virtualNodesAt is a reader of the primary's Node objects: one virtual node per entry, at its port.
func virtualNodesAt(t *testing.T, ports map[string]int32) client.Reader {
	t.Helper()
	var objs []client.Object
	for name, port := range ports {
		cluster, _ := flotillav1.ClusterOfNode(name)
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{flotillav1.LabelCluster: cluster, flotillav1.LabelNodeType: flotillav1.NodeTypeVirtualKubelet}},
			Status: corev1.NodeStatus{DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: port}}}})
	}
	return crfake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
}

func TestKubeletAttributesAreTheKubeletsFineGrainedOnes(t *testing.T) {
	attrs := func(verb string, subs ...string) []authorizationv1.ResourceAttributes {
		var out []authorizationv1.ResourceAttributes
		for _, s := range subs {
			out = append(out, authorizationv1.ResourceAttributes{Verb: verb, Resource: "nodes", Subresource: s, Name: "flotilla-eu"})
		}
		return out
	}
	tests := []struct {
		method, path string
		want         []authorizationv1.ResourceAttributes
	}{
		{http.MethodGet, "/pods", attrs("get", "pods", "proxy")},
		{http.MethodGet, "/pods/", attrs("get", "pods", "proxy")},
		{http.MethodGet, "/runningpods/", attrs("get", "pods", "proxy")},
		{http.MethodGet, "/healthz", attrs("get", "healthz", "proxy")},
		{http.MethodGet, "/healthz/ping", attrs("get", "healthz", "proxy")},
		{http.MethodGet, "/stats/summary", attrs("get", "stats")},
		{http.MethodGet, "/metrics/resource", attrs("get", "metrics")},
		{http.MethodGet, "/metrics", attrs("get", "metrics")},
		{http.MethodGet, "/logs/", attrs("get", "log")},
		{http.MethodGet, "/configz", attrs("get", "configz", "proxy")},
		{http.MethodPost, "/run/ns/web/c", attrs("create", "proxy")},
		{http.MethodGet, "/podsx", attrs("get", "proxy")},
		{http.MethodDelete, "/pods", attrs("delete", "pods", "proxy")},
	}
	for _, tc := range tests {
		if got := kubeletAttributes(tc.method, tc.path, "flotilla-eu"); !slices.Equal(got, tc.want) {
			t.Errorf("%s %s: %+v, want %+v", tc.method, tc.path, got, tc.want)
		}
	}
}

func TestEndpointOf(t *testing.T) {
	for path, want := range map[string]endpoint{
		"/pods": endpointPods, "/pods/": endpointPods, "/runningpods/": endpointRunningPods, "/runningpods": endpointRunningPods,
		"/healthz": endpointHealthz, "/healthz/syncloop": endpointHealthz, "/stats/summary": endpointSummary,
		"/stats/summary/": endpointSummary, "/metrics/resource": endpointResourceMetrics,
		"/healthz/a/b": endpointNone, "/stats": endpointNone, "/metrics": endpointNone, "/containerLogs/ns/web/c": endpointNone,
		// The paths of the one shared port of old are not served any more.
		"/metrics/nodes/flotilla-eu/metrics/resource": endpointNone, "/stats/nodes/flotilla-eu/summary": endpointNone,
	} {
		if got := endpointOf(path); got != want {
			t.Errorf("%s: %d, want %d", path, got, want)
		}
	}
}

func TestRunningPodsListsOnlyProxiesWhoseOwnDelegateRuns(t *testing.T) {
	proxy := func(name, uid string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("proxy-uid-" + uid)},
			Spec: corev1.PodSpec{NodeName: "flotilla-eu", Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}
	}
	delegate := func(name, uid string, running ...string) corev1.Pod {
		d := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels: map[string]string{flotillav1.LabelPrimary: "primary-1"}, Annotations: map[string]string{flotillav1.AnnotationProxyUID: "proxy-uid-" + uid}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}, {Name: "sidecar", Image: "envoy"}}}}
		for _, c := range []string{"app", "sidecar"} {
			st := corev1.ContainerStatus{Name: c, Image: "docker.io/library/" + c}
			if slices.Contains(running, c) {
				st.State.Running = &corev1.ContainerStateRunning{}
			} else {
				st.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
			}
			d.Status.ContainerStatuses = append(d.Status.ContainerStatuses, st)
		}
		return d
	}
	foreign := delegate("foreign", "4", "app")
	foreign.Labels = nil
	proxies := []corev1.Pod{proxy("web", "1"), proxy("waiting", "2"), proxy("starting", "3"), proxy("foreign", "4"), proxy("stale", "5")}
	delegates := []corev1.Pod{delegate("web", "1", "app"), delegate("starting", "3"), foreign, delegate("stale", "an-earlier-incarnation", "app")}
	got := RunningPods(proxies, delegates, "primary-1")
	want := []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "proxy-uid-1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}}}
	if len(got) != 1 || got[0].Name != "web" || got[0].UID != want[0].UID || !equality.Semantic.DeepEqual(got[0].Spec.Containers, want[0].Spec.Containers) ||
		got[0].Spec.NodeName != "" || len(got[0].Status.ContainerStatuses) != 0 {
		t.Errorf("running pods %+v, want %+v", got, want)
	}
	if got := RunningPods(nil, nil, "primary-1"); got == nil || len(got) != 0 {
		t.Errorf("no proxies: %v, want an empty list", got)
	}
}

func TestServedPorts(t *testing.T) {
	node := func(name string, port int32, labelled bool) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
			Status: corev1.NodeStatus{DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: port}}}}
		if labelled {
			n.Labels[flotillav1.LabelCluster] = strings.TrimPrefix(name, flotillav1.VirtualNodePrefix)
		}
		return n
	}
	got := ServedPorts([]corev1.Node{
		node("flotilla-us", 10250, true), node("flotilla-eu", 10250, true), // the shared port of old: the first by name
		node("flotilla-ap", 10251, true), node("flotilla-out", 9000, true), node("flotilla-none", 0, true),
		node("worker-1", 10252, true), node("flotilla-unlabelled", 10253, false),
	}, PortRange{First: 10250, Count: 10})
	names := map[int32]string{}
	for p, n := range got {
		names[p] = n.Name
	}
	want := map[int32]string{10250: "flotilla-eu", 10251: "flotilla-ap"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("served %v, want %v", names, want)
	}
}

// subresourcePrimary is a fake primary whose bearer tokens name their user ("token-of-alice" is
// alice), and whose SubjectAccessReviews allow what allowed lists as "user:verb:nodes/sub:name".
func subresourcePrimary(allowed map[string]bool, objs ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(objs...)
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if user, ok := strings.CutPrefix(tr.Spec.Token, "token-of-"); ok {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: user}}
		}
		return true, tr, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		ra := sar.Spec.ResourceAttributes
		sar.Status.Allowed = allowed[fmt.Sprintf("%s:%s:%s/%s:%s", sar.Spec.User, ra.Verb, ra.Resource, ra.Subresource, ra.Name)]
		return true, sar, nil
	})
	return c
}

// get asks h for path as the node's kubelet API, with a bearer token; it returns the code and body.
func get(h http.Handler, node, path, token string) (int, string) {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	withNode(node, h).ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

func onNode(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-of-" + name)},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}
}

func TestPodsListsTheNodesProxiesAsAKubeletListsItsPods(t *testing.T) {
	primary := subresourcePrimary(map[string]bool{"alice:get:nodes/pods:flotilla-eu": true, "bob:get:nodes/proxy:flotilla-eu": true},
		onNode("web", "flotilla-eu"), onNode("db", "flotilla-eu"), onNode("other", "flotilla-us"), onNode("local", "worker-1"))
	h := (&Server{Primary: primary, Secondaries: secondariesMap{}, Log: logr.Discard()}).authenticated(ok200)
	for _, user := range []string{"alice", "bob"} { // nodes/pods, or else nodes/proxy, as a kubelet allows
		code, body := get(h, "flotilla-eu", "/pods", "token-of-"+user)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", user, code, body)
		}
		var list corev1.PodList
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			t.Fatal(err)
		}
		if list.Kind != "PodList" || list.APIVersion != "v1" {
			t.Errorf("kind %q apiVersion %q, want PodList v1", list.Kind, list.APIVersion)
		}
		var names []string
		for _, p := range list.Items {
			names = append(names, p.Name)
			if p.Spec.NodeName != "flotilla-eu" || len(p.Spec.Containers) != 1 {
				t.Errorf("pod %s: node %s, containers %v: want the whole pod", p.Name, p.Spec.NodeName, p.Spec.Containers)
			}
		}
		if slices.Sort(names); !slices.Equal(names, []string{"db", "web"}) {
			t.Errorf("%s: pods %v, want db and web (this node's only)", user, names)
		}
	}
	if code, _ := get(h, "flotilla-us", "/pods", "token-of-alice"); code != http.StatusForbidden {
		t.Errorf("alice on another node: %d, want 403", code)
	}
	if code, _ := get(h, "flotilla-eu", "/pods", "token-of-carol"); code != http.StatusForbidden {
		t.Errorf("carol, without rights: %d, want 403", code)
	}
}

func TestHealthzAndTheNodesAuthorization(t *testing.T) {
	primary := subresourcePrimary(map[string]bool{"alice:get:nodes/healthz:flotilla-eu": true, "bob:get:nodes/proxy:flotilla-eu": true,
		"mallory:get:nodes/pods:flotilla-eu": true})
	h := (&Server{Primary: primary, Secondaries: secondariesMap{}, Log: logr.Discard()}).authenticated(ok200)
	for _, tc := range []struct {
		user, path string
		code       int
		body       string
	}{
		{"alice", "/healthz", http.StatusOK, "ok"},
		{"bob", "/healthz", http.StatusOK, "ok"},
		{"mallory", "/healthz", http.StatusForbidden, ""},
		{"alice", "/healthz/syncloop", http.StatusOK, "ok"},
		// stats and metrics have no nodes/proxy fallback, as at a kubelet.
		{"bob", "/stats/summary", http.StatusForbidden, ""},
		{"bob", "/metrics/resource", http.StatusForbidden, ""},
		// Not a path the virtual kubelet serves: authorised as nodes/proxy, then not found.
		{"bob", "/configz", http.StatusNotFound, ""},
		{"alice", "/configz", http.StatusForbidden, ""},
		{"bob", "/metrics/nodes/flotilla-eu/metrics/resource", http.StatusForbidden, ""},
	} {
		code, body := get(h, "flotilla-eu", tc.path, "token-of-"+tc.user)
		if code != tc.code || (tc.body != "" && body != tc.body) {
			t.Errorf("%s %s: %d %q, want %d %q", tc.user, tc.path, code, body, tc.code, tc.body)
		}
	}
	if code, _ := get(h, "flotilla-eu", "/healthz", ""); code != http.StatusUnauthorized {
		t.Errorf("anonymous /healthz: %d, want 401", code)
	}
}

func TestAPodIsServedOnlyAtItsOwnNodesPort(t *testing.T) {
	primary := subresourcePrimary(map[string]bool{}, onNode("web", "flotilla-eu"))
	// alice may read logs of any pod (her right is on the pod, not the node).
	primary.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		sar.Status.Allowed = sar.Spec.User == "alice" && sar.Spec.ResourceAttributes.Subresource == "log"
		return true, sar, nil
	})
	h := (&Server{Primary: primary, Secondaries: secondariesMap{}, Log: logr.Discard()}).authenticated(ok200)
	if code, body := get(h, "flotilla-eu", "/containerLogs/ns/web/app", "token-of-alice"); code != http.StatusOK {
		t.Errorf("its own node: %d %s", code, body)
	}
	if code, body := get(h, "flotilla-us", "/containerLogs/ns/web/app", "token-of-alice"); code != http.StatusNotFound || !strings.Contains(body, "not on node flotilla-us") {
		t.Errorf("another node's port: %d %s, want 404", code, body)
	}
}

// TestEachPortServesItsOwnNode runs the server: two virtual nodes, two ports, each answering
// for its own node over TLS.
func TestEachPortServesItsOwnNode(t *testing.T) {
	ca, err := pki.NewCA("test-client-ca", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	primary := subresourcePrimary(map[string]bool{"alice:get:nodes/pods:flotilla-eu": true, "alice:get:nodes/pods:flotilla-us": true},
		onNode("web", "flotilla-eu"), onNode("api", "flotilla-us"),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "extension-apiserver-authentication"},
			Data: map[string]string{"client-ca-file": string(ca.CertPEM)}})
	ports := map[string]int32{}
	for _, n := range []string{"flotilla-eu", "flotilla-us"} {
		p, err := testbed.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[n] = int32(p)
	}
	k := &Server{Primary: primary, Secondaries: secondariesMap{}, Nodes: virtualNodesAt(t, ports),
		Ports: PortRange{First: 1024, Count: 64511}, BindHost: "127.0.0.1", Address: "127.0.0.1", Log: logr.Discard(), SignTimeout: time.Second}
	ctx, stop := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- k.Start(ctx) }()
	defer func() {
		stop()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("the kubelet API stopped with %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("the kubelet API did not stop within 10 s")
		}
	}()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the self-signed certificate is checked below
	for node, port := range ports {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
		waitListening(t, addr)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/pods", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer token-of-alice")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var list corev1.PodList
		if err := json.Unmarshal(body, &list); err != nil || len(list.Items) != 1 || list.Items[0].Spec.NodeName != node {
			t.Errorf("%s at %d: %d %s, want its one pod", node, port, resp.StatusCode, body)
		}
		// Until the cluster signs one: a self-signed certificate naming the node's address.
		if leaf := resp.TLS.PeerCertificates[0]; !slices.ContainsFunc(leaf.IPAddresses, func(ip net.IP) bool { return ip.String() == "127.0.0.1" }) ||
			!slices.Contains(leaf.DNSNames, node) {
			t.Errorf("%s: certificate for %v %v", node, leaf.DNSNames, leaf.IPAddresses)
		}
	}
}
