package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// orphanFixture is a primary with secondary eu registered, its virtual node, and the proxies given.
func orphanFixture(t *testing.T, proxies ...*corev1.Pod) client.Client {
	t.Helper()
	reg := clientcmdapi.NewConfig()
	reg.Clusters["eu"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	reg.AuthInfos["eu"] = &clientcmdapi.AuthInfo{Token: "t"}
	reg.Contexts["eu"] = &clientcmdapi.Context{Cluster: "eu", AuthInfo: "eu"}
	objs := []client.Object{kubeSystem("primary-id"), registrationSecret(t, reg),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: flotillav1.VirtualNodeName("eu")}}}
	for _, p := range proxies {
		objs = append(objs, p)
	}
	return fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(objs...).Build()
}

// statefulProxy is a proxy on node owned by the StatefulSet db.
func statefulProxy(name, node string) *corev1.Pod {
	p := proxyPod(name, name+"-uid", node, corev1.PodRunning)
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "StatefulSet",
		Name: "db", UID: "db-uid", Controller: ptr.To(true)}}
	return p
}

// cordoned says whether eu's virtual node was cordoned: remove went past its checks.
func cordoned(t *testing.T, primary client.Client) bool {
	t.Helper()
	var n corev1.Node
	if err := primary.Get(t.Context(), client.ObjectKey{Name: flotillav1.VirtualNodeName("eu")}, &n); err != nil {
		t.Fatal(err)
	}
	return n.Spec.Unschedulable
}

// `cluster remove --orphan` lets the virtual node go while the orphaned delegates run on: the
// proxies bound to it are then deleted and their controllers re-create them elsewhere, so an
// at-most-once pod (a StatefulSet's, or one annotated flotilla.dev/at-most-once) would run twice.
// remove refuses before it changes anything, naming them, unless --force.
func TestRemoveOrphanRefusesWhileAtMostOnceProxiesAreBound(t *testing.T) {
	node := flotillav1.VirtualNodeName("eu")
	annotated := proxyPod("singleton", "s-uid", node, corev1.PodRunning)
	annotated.Annotations = map[string]string{flotillav1.AnnotationAtMostOnce: ""}
	proxies := []*corev1.Pod{annotated, proxyPod("web-1", "w-uid", node, corev1.PodRunning),
		statefulProxy("db-elsewhere", flotillav1.VirtualNodeName("us"))}
	for i := range 5 {
		proxies = append(proxies, statefulProxy(fmt.Sprintf("db-%d", i), node))
	}
	finished := statefulProxy("db-done", node)
	finished.Status.Phase = corev1.PodSucceeded
	proxies = append(proxies, finished)

	primary := orphanFixture(t, proxies...)
	var out bytes.Buffer
	err := removeCluster(t.Context(), &GlobalOptions{}, primary, "eu", "eu", removeOptions{orphan: true, timeout: time.Second}, &out)
	if err == nil {
		t.Fatalf("remove --orphan with at-most-once proxies on %s went ahead:\n%s", node, out.String())
	}
	msg := err.Error() // 6: the five StatefulSet pods on eu and the annotated one; a few named
	for _, want := range []string{"6 at-most-once proxies", "demo/db-0, demo/db-1, demo/db-2 and 3 more", "--force", "twice"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal does not say %q: %s", want, msg)
		}
	}
	for _, not := range []string{"web-1", "db-elsewhere", "db-done", "demo/db-3"} {
		if strings.Contains(msg, not) {
			t.Errorf("refusal names %q (not at-most-once, not on %s, finished, or past the few named): %s", not, node, msg)
		}
	}
	if cordoned(t, primary) {
		t.Error("the virtual node was cordoned before the refusal: remove must change nothing when it refuses")
	}

	// --force orphans them anyway: remove goes on (and stops later, at the unreachable secondary).
	primary = orphanFixture(t, proxies...)
	out.Reset()
	err = removeCluster(t.Context(), &GlobalOptions{}, primary, "eu", "eu", removeOptions{orphan: true, force: true, timeout: time.Second}, &out)
	if err != nil && strings.Contains(err.Error(), "--force") {
		t.Fatalf("--force still refused: %v", err)
	}
	if !cordoned(t, primary) {
		t.Errorf("--force: remove did not go on (err %v):\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "twice") {
		t.Errorf("--force does not warn that they may run twice:\n%s", out.String())
	}

	// Without at-most-once proxies on the node, --orphan needs no --force.
	primary = orphanFixture(t, proxyPod("web-1", "w-uid", node, corev1.PodRunning), statefulProxy("db-0", flotillav1.VirtualNodeName("us")))
	out.Reset()
	err = removeCluster(t.Context(), &GlobalOptions{}, primary, "eu", "eu", removeOptions{orphan: true, timeout: time.Second}, &out)
	if err != nil && strings.Contains(err.Error(), "--force") {
		t.Fatalf("refused without an at-most-once proxy on the node: %v", err)
	}
	if !cordoned(t, primary) {
		t.Errorf("remove --orphan did not go on (err %v):\n%s", err, out.String())
	}
}

func TestRemoveHelpSaysWhatForceDoes(t *testing.T) {
	out, err := run(t, "cluster", "remove", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--force", "at-most-once", "twice"} {
		if !strings.Contains(out, want) {
			t.Errorf("cluster remove --help does not say %q:\n%s", want, out)
		}
	}
}
