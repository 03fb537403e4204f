package election

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/seal"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// fuzzKey stands for the manager's admission seal key.
var fuzzKey = seal.Key("fuzz-key-fuzz-key-fuzz-key-fuzz!")

// levels are the Pod Security levels a fuzzed namespace enforces.
var levels = []string{"privileged", "baseline", "restricted"}

// FuzzAdmitAndDelegate drives the whole admission decision and the delegate
// translation with arbitrary pods and asserts what must hold for any input: no panic; an admitted
// pod's delegate passes its namespace's Pod Security level; the delegate's host networking, host
// ports and tolerations are only ever the user's own; Flotilla's labels and annotations are never
// taken from the input. `make test` runs it briefly; `go test ./pkg/election -fuzz FuzzAdmitAndDelegate`
// runs it for as long as one likes.
func FuzzAdmitAndDelegate(f *testing.F) {
	seeds := []string{
		`{"spec":{"containers":[{"name":"c","image":"nginx"}]}}`,
		`{"spec":{"hostNetwork":true,"containers":[{"name":"c","image":"nginx","ports":[{"containerPort":80,"hostPort":8080}]}]}}`,
		`{"spec":{"containers":[{"name":"c","image":"nginx","securityContext":{"privileged":true}}]}}`,
		`{"spec":{"hostPID":true,"hostIPC":true,"containers":[{"name":"c","image":"nginx"}],"volumes":[{"name":"h","hostPath":{"path":"/"}}]}}`,
		`{"spec":{"tolerations":[{"operator":"Exists"}],"nodeSelector":{"node-role.kubernetes.io/control-plane":""},"containers":[{"name":"c","image":"nginx"}]}}`,
		`{"metadata":{"labels":{"flotilla.dev/proxy":"true"},"annotations":{"flotilla.dev/delegate-constraints":"{\"hostNetwork\":true,\"tolerations\":[{\"operator\":\"Exists\"}]}"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`,
		`{"metadata":{"annotations":{"flotilla.dev/proxy-uid":"x","flotilla.dev/delegate-ip":"1.2.3.4"},"finalizers":["flotilla.dev/delegate"]},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`,
		`{"spec":{"securityContext":{"runAsNonRoot":true,"seccompProfile":{"type":"RuntimeDefault"}},"containers":[{"name":"c","image":"nginx","securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}}}]}}`,
		`{"spec":{"initContainers":[{"name":"i","image":"busybox","ports":[{"containerPort":53,"hostPort":53,"protocol":"UDP"}]}],"containers":[{"name":"c","image":"nginx","resources":{"requests":{"cpu":"100m"}}}]}}`,
		// The forged proxy that got a delegate mounting a secondary's PVC: labelled
		// flotilla.dev/primary so that the webhook skipped it, bound by hand.
		`{"metadata":{"labels":{"flotilla.dev/primary":"x","flotilla.dev/proxy":"true"},"annotations":{"flotilla.dev/delegate-constraints":"{}"}},"spec":{"nodeName":"flotilla-eu","containers":[{"name":"c","image":"busybox"}],"volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"db-data"}}]}}`,
		`{"metadata":{"annotations":{"flotilla.dev/seal":"v1.n.AAAA"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`,
		`{"spec":{"containers":[{"name":"c","image":"nginx"}],"volumes":[{"name":"v","csi":{"driver":"d","nodePublishSecretRef":{"name":"db-root"}}}]}}`,
	}
	for i, s := range seeds {
		f.Add([]byte(s), uint8(i%len(levels)))
	}
	clusters := []placement.ClusterView{clusterOf("eu", true, "64", map[string]string{"disk": "ssd"})}
	f.Fuzz(func(t *testing.T, raw []byte, level uint8) {
		input := &corev1.Pod{}
		if err := json.Unmarshal(raw, input); err != nil {
			return
		}
		input.Namespace = "ns"
		if input.Name == "" && input.GenerateName == "" {
			input.Name = "p" // the API server refuses a pod with neither
		}
		if input.Annotations == nil {
			input.Annotations = map[string]string{}
		}
		input.Annotations[flotillav1.AnnotationElect] = ""
		nsLabels := map[string]string{"pod-security.kubernetes.io/enforce": levels[int(level)%len(levels)]}

		proxy, err := Admit(t.Context(), input.DeepCopy(), nsLabels, clusters, nil, Options{Choose: func([]int64) int { return 0 }})
		if err != nil {
			var rej *placement.Rejection
			if !errors.As(err, &rej) {
				t.Fatalf("not a rejection: %v", err)
			}
			return
		}
		if !Elected(input, Options{}) {
			// Skipped by the webhook (labelled flotilla.dev/primary): whatever it carries, it has
			// no seal the manager's key made, so the proxy reconciler gives it no delegate.
			if seal.Verify(fuzzKey, proxy) == nil {
				t.Fatal("a pod the webhook skipped carries a valid seal")
			}
			return
		}
		proxy.Annotations[flotillav1.AnnotationSeal] = seal.Stamp(fuzzKey, proxy)
		if err := seal.Verify(fuzzKey, proxy); err != nil {
			t.Fatalf("the webhook's own proxy: %v", err)
		}
		if problems := translate.NotOffloadable(&proxy.Spec); len(problems) > 0 {
			t.Fatalf("admitted what cannot be offloaded: %v", problems)
		}
		if forged := notForged(input); forged != nil {
			t.Fatalf("admitted a pod carrying Flotilla's state: %v", forged)
		}
		if proxy.Labels[flotillav1.LabelProxy] != "true" || proxy.Spec.HostNetwork {
			t.Fatalf("proxy: label %q, hostNetwork %v", proxy.Labels[flotillav1.LabelProxy], proxy.Spec.HostNetwork)
		}
		for _, c := range append(append([]corev1.Container{}, proxy.Spec.InitContainers...), proxy.Spec.Containers...) {
			for _, p := range c.Ports {
				if p.HostPort != 0 {
					t.Fatalf("proxy container %s keeps host port %d", c.Name, p.HostPort)
				}
			}
		}

		proxy.UID = "proxy-uid"
		delegate, err := translate.Delegate(proxy, "primary-id", translate.Owner("primary-id", "owner-uid"))
		if err != nil {
			t.Fatalf("the webhook's own constraints do not translate: %v", err)
		}
		if v := translate.PodSecurityViolation(&delegate.ObjectMeta, &delegate.Spec, nsLabels); v != "" {
			t.Fatalf("admitted, but the delegate %s", v)
		}
		if delegate.Spec.HostNetwork != input.Spec.HostNetwork {
			t.Fatalf("delegate hostNetwork %v, the user asked %v", delegate.Spec.HostNetwork, input.Spec.HostNetwork)
		}
		userPorts := map[string]int32{}
		for _, c := range append(append([]corev1.Container{}, input.Spec.InitContainers...), input.Spec.Containers...) {
			for _, p := range c.Ports {
				userPorts[translate.HostPortKey(c.Name, p)] = p.HostPort
			}
		}
		for _, c := range append(append([]corev1.Container{}, delegate.Spec.InitContainers...), delegate.Spec.Containers...) {
			for _, p := range c.Ports {
				if p.HostPort != 0 && userPorts[translate.HostPortKey(c.Name, p)] != p.HostPort {
					t.Fatalf("delegate container %s got host port %d the user did not ask for", c.Name, p.HostPort)
				}
			}
		}
		for _, tol := range delegate.Spec.Tolerations {
			if !hasToleration(input.Spec.Tolerations, tol) {
				t.Fatalf("delegate toleration %+v is not the user's", tol)
			}
		}
		if _, ok := delegate.Labels[flotillav1.LabelProxy]; ok || delegate.Labels[flotillav1.LabelPrimary] != "primary-id" {
			t.Fatalf("delegate labels %v", delegate.Labels)
		}
		for k, v := range delegate.Annotations {
			ours := (k == flotillav1.AnnotationProxyUID && v == "proxy-uid") ||
				(k == flotillav1.AnnotationAtMostOnce && v == "" && translate.AtMostOnce(proxy))
			if strings.HasPrefix(k, "flotilla.dev/") && !ours {
				t.Fatalf("delegate annotation %s=%q taken from the input", k, v)
			}
		}
		if len(delegate.OwnerReferences) != 1 || delegate.OwnerReferences[0].UID != "owner-uid" {
			t.Fatalf("delegate owners %v", delegate.OwnerReferences)
		}
	})
}

func hasToleration(list []corev1.Toleration, t corev1.Toleration) bool {
	for _, x := range list {
		if x.MatchToleration(&t) && x.Value == t.Value && equalSeconds(x.TolerationSeconds, t.TolerationSeconds) {
			return true
		}
	}
	return false
}

func equalSeconds(a, b *int64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
