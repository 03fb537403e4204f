package e2e

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-dev/flotilla/test/testbed"
)

// Admiralty's own e2e scenarios (admiraltyio/admiralty test/e2e: logs, exec, follow, cleanup)
// with their manifests, commands and expectations as written there, on real containers. Only
// what the bed imposes differs: the image is the bed's application image (busybox's commands as
// the same names), never pulled, and tolerates the bed's real-node taint. Admiralty pins its
// target with `nodeSelector: {a: b}` after labelling the target's nodes a=b; so does this, on
// secondary1's real node. The pods carry Admiralty's annotation, which Flotilla accepts
// (--accept-admiralty-annotation, on by default).
var _ = Describe("Admiralty's e2e scenarios, as written, on real containers", Ordered, Label("real-nodes"), func() {
	const ns = "admiralty-e2e"
	var target *testbed.Cluster

	BeforeAll(func(ctx SpecContext) {
		requireSecondaryRealNodes()
		joinBothSecondaries(ctx)
		target = bed.Secondaries[0]
		importAppImage(ctx, false)
		labelTarget := func(ctx SpecContext, patch string) {
			_, err := target.Clientset.CoreV1().Nodes().Patch(ctx, target.RealNode.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		labelTarget(ctx, `{"metadata":{"labels":{"a":"b"}}}`)
		DeferCleanup(func(ctx SpecContext) { labelTarget(ctx, `{"metadata":{"labels":{"a":null}}}`) })
		enabledNamespace(ctx, ns)
	})

	// apply is `kubectl apply -f -` in the primary, as Admiralty's scripts run it.
	apply := func(ctx SpecContext, manifest string) {
		out, err := kubectlIn(ctx, ns, []byte(manifest), "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
	}

	It("logs: a Job that echoes bonjour completes, and `kubectl logs job/logs` prints bonjour", func(ctx SpecContext) {
		apply(ctx, admiraltyJob("logs", `["/bin/sh", "-c", "echo bonjour"]`, ""))
		out, err := kubectlIn(ctx, ns, nil, "wait", "job/logs", "--for=condition=Complete", "--timeout=60s")
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = kubectlIn(ctx, ns, nil, "logs", "job/logs")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("bonjour"))
		expectDelegateIn(ctx, target, ns, "job-name=logs")
	}, SpecTimeout(2*time.Minute))

	It("exec: `kubectl exec job/exec ls` runs in the Job's running container and lists bin", func(ctx SpecContext) {
		apply(ctx, admiraltyJob("exec", `["/bin/sh", "-c", "sleep 100"]`, ""))
		Eventually(func() (string, error) {
			return kubectlIn(ctx, ns, nil, "get", "pod", "-l", "job-name=exec", "-o", "name")
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(ContainSubstring("pod/"))
		out, err := kubectlIn(ctx, ns, nil, "wait", "pod", "-l", "job-name=exec", "--for=condition=ContainersReady", "--timeout=60s")
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = kubectlIn(ctx, ns, nil, "exec", "job/exec", "--", "ls")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(strings.Fields(out)).To(ContainElement("bin"))
	}, SpecTimeout(2*time.Minute))

	It("follow: a Job whose container reads the ConfigMap and Secret it uses (envFrom) in its secondary completes", func(ctx SpecContext) {
		apply(ctx, `apiVersion: v1
kind: ConfigMap
metadata:
  name: follow
data:
  MY_CONFIG: foo
---
apiVersion: v1
kind: Secret
metadata:
  name: follow
stringData:
  MY_SECRET: bar
`)
		apply(ctx, admiraltyJob("follow", `["/bin/sh", "-c", "[ $MY_CONFIG = foo ] && [ $MY_SECRET = bar ]"]`, `
        envFrom:
        - configMapRef:
            name: follow
        - secretRef:
            name: follow`))
		out, err := kubectlIn(ctx, ns, nil, "wait", "job/follow", "--for=condition=Complete", "--timeout=60s")
		Expect(err).NotTo(HaveOccurred(), out)
	}, SpecTimeout(2*time.Minute))

	It("cleanup: deleting an elected pod stops its real container and deletes its delegate; the pod is gone within 30 s", func(ctx SpecContext) {
		apply(ctx, `apiVersion: v1
kind: Pod
metadata:
  name: test-delete
  annotations:
    multicluster.admiralty.io/elect: ""
spec:
  nodeSelector:
    a: b
  tolerations:
  - key: testbed.flotilla.dev/real-node
    operator: Exists
    effect: NoSchedule
  containers:
  - name: pause
    image: testbed.local/testapp:1
    imagePullPolicy: Never
    command: ["sleep", "100000"]
`)
		out, err := kubectlIn(ctx, ns, nil, "wait", "pod/test-delete", "--for=condition=Ready", "--timeout=60s")
		Expect(err).NotTo(HaveOccurred(), out)
		delegate, err := target.Clientset.CoreV1().Pods(ns).Get(ctx, "test-delete", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(delegate.Spec.NodeName).To(Equal(target.RealNode.Name))
		out, err = kubectlIn(ctx, ns, nil, "delete", "pod", "test-delete", "--wait", "--timeout=30s")
		Expect(err).NotTo(HaveOccurred(), out)
		_, err = target.Clientset.CoreV1().Pods(ns).Get(ctx, "test-delete", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the delegate in %s once its proxy is gone: %v", target.Name, err)
	}, SpecTimeout(2*time.Minute))
})

// admiraltyJob is the Job of Admiralty's logs, exec and follow tests: busybox's command, Never
// restarted, pinned by `nodeSelector: {a: b}`, elected by Admiralty's annotation. extra is
// appended to the container (indented for it).
func admiraltyJob(name, command, extra string) string {
	return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata:
  name: %[1]s
spec:
  template:
    metadata:
      annotations:
        multicluster.admiralty.io/elect: ""
    spec:
      nodeSelector:
        a: b
      tolerations:
      - key: testbed.flotilla.dev/real-node
        operator: Exists
        effect: NoSchedule
      restartPolicy: Never
      containers:
      - name: c
        image: testbed.local/testapp:1
        imagePullPolicy: Never
        command: %[2]s%[3]s
`, name, command, extra)
}

// expectDelegateIn checks that the pods of a selector ran as delegates in a cluster, on its real node.
func expectDelegateIn(ctx SpecContext, c *testbed.Cluster, ns, selector string) {
	pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	Expect(err).NotTo(HaveOccurred())
	Expect(pods.Items).NotTo(BeEmpty(), "delegates of %s in %s", selector, c.Name)
	for _, p := range pods.Items {
		Expect(p.Spec.NodeName).To(Equal(c.RealNode.Name), "delegate %s", p.Name)
	}
}
