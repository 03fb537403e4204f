package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// Liqo's own e2e scenarios (liqotech/liqo test/e2e/cruise) about offloaded pods, on real
// containers, with Liqo's workloads and expectations where Flotilla's model allows them, and its
// timeouts (1 minute, polled every 3 s; 30 s for what must not happen). What changes, and why:
//
//   - Offloading: Liqo offloads a namespace (liqoctl offload namespace, a NamespaceOffloading) and
//     steers pods with affinity on liqo.io/type; Flotilla elects a pod by its annotation, and
//     flotilla.dev/clusters stands for Liqo's choice of a provider. A pod bound by spec.nodeName
//     to the virtual node, as Liqo's reflection test binds it, is refused with a clear error by
//     Flotilla's webhook (a bound pod cannot be placed), so the scheduler binds it here.
//   - Images: nginx and netshoot (curl, python3 -m http.server) become the bed's application image
//     (an HTTP server on 8080 that answers with its pod's name; wget). Liqo's checks pass on a 200;
//     these pass on the answer of the very pod aimed at, which is stronger.
//   - Network: Liqo remaps pod CIDRs and reflects the consumer's EndpointSlices to every
//     provider; Flotilla either needs no remapping (a flat pod network: a proxy's IP is its
//     delegate's) or keeps clusters apart (isolated), and a Service it copies to a secondary
//     selects the delegates running there. So the network test runs on the flat network, and a
//     pod's request to its own cluster's Service is answered by a pod of that cluster. The
//     host-network, NodePort-from-outside, LoadBalancer, external and IP-resource checks test a
//     cluster's network, not offloading, and are not taken.
//   - Events: Liqo reflects every Event of an offloaded pod; Flotilla shows a delegate's Events on
//     its proxy while the delegate is not healthy (a healthy one has nothing to tell, and its
//     Events would cost a read of its secondary each).
//   - API server interaction: Liqo's Job runs kubectl against the consumer from the provider.
//     Flotilla gives a delegate no credential for the primary (by design; see docs/security.md),
//     so the Job prints the name it runs under, and its log read through the primary must be the
//     proxy's name, as Liqo's must.
//   - Resource enforcement (Tenants, ResourceSlices), RuntimeClass liqo, and `liqoctl move
//     volume` are Liqo's own machinery; cordoned clusters are covered by the election specs.
var _ = Describe("Liqo's e2e scenarios, adapted, on real containers", Ordered, Label("real-nodes"), func() {
	const ns = "liqo-e2e"
	const timeout, interval = time.Minute, 3 * time.Second
	flat := false

	BeforeAll(func(ctx SpecContext) {
		requireSecondaryRealNodes()
		joinBothSecondaries(ctx)
		// The suite's manager runs with --pod-network=flat on a flat bed.
		flat = managerPodNetwork() == testbed.PodNetworkFlat
		importAppImage(ctx, bed.RealNode != nil)
		enabledNamespace(ctx, ns)
	})

	// electedFor is Liqo's remote workload's pod template: the application image on a real node,
	// elected for one cluster (or any, when cluster is empty).
	electedFor := func(cluster string, labels map[string]string, c corev1.Container) corev1.PodTemplateSpec {
		ann := map[string]string{flotillav1.AnnotationElect: ""}
		if cluster != "" {
			ann[flotillav1.AnnotationClusters] = cluster
		}
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: ann}, Spec: onRealNode(c)}
	}
	deployment := func(ctx SpecContext, name string, tmpl corev1.PodTemplateSpec) {
		one := int32(1)
		_, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
	readyReplicas := func(ctx SpecContext, name string) func() (int32, error) {
		return func() (int32, error) {
			d, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return 0, err
			}
			return d.Status.ReadyReplicas, nil
		}
	}

	// reflection_test.go: "Remote pods should be scheduled on the provider clusters and ready",
	// and "Each event on the providers should be replicated on the consumer".
	It("reflection: a pod for each provider runs there under its own namespace and name, Ready within 1 minute, and an Event on its delegate reaches the primary", func(ctx SpecContext) {
		for _, c := range bed.Secondaries {
			tmpl := electedFor(c.Name, nil, appContainer("nginx", nil))
			_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "pod-test-" + c.Name, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		for _, c := range bed.Secondaries {
			Eventually(func(g Gomega) {
				d, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, "pod-test-"+c.Name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(podReady(d)).To(BeTrue(), "the delegate in %s: %s", c.Name, d.Status.Phase)
			}).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		}

		// A delegate with something to tell: its container runs, its readiness never passes.
		c := bed.Secondaries[0]
		waiting := appContainer("waiting", []string{"sleep", "3600"})
		waiting.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
			Exec: &corev1.ExecAction{Command: []string{"test", "-e", "/ready"}}}}
		tmpl := electedFor(c.Name, nil, waiting)
		_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "pod-events", Annotations: tmpl.Annotations}, Spec: tmpl.Spec}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		var delegate *corev1.Pod
		Eventually(func(g Gomega) {
			delegate, err = c.Clientset.CoreV1().Pods(ns).Get(ctx, "pod-events", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(delegate.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		now := metav1.Now()
		_, err = c.Clientset.CoreV1().Events(ns).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "pod-events.provider"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: delegate.Name, UID: delegate.UID},
			Reason:         "ProviderEvent", Message: "an event created on the provider", Type: corev1.EventTypeNormal,
			FirstTimestamp: now, LastTimestamp: now, Count: 1, Source: corev1.EventSource{Component: "liqo-e2e"},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			evs, err := bed.Primary.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=pod-events"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(evs.Items).To(ContainElement(And(HaveField("Reason", "ProviderEvent"),
				HaveField("Message", ContainSubstring("an event created on the provider")))))
		}).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	}, SpecTimeout(4*time.Minute))

	// network_test.go (liqoctl test network): pod to pod at every endpoint of the Service, and pod
	// to its ClusterIP, from every pod of every cluster.
	It("network: on a flat pod network, every pod of every cluster reaches every endpoint of the Service, and its own cluster's copy of it", func(ctx SpecContext) {
		if !flat {
			Skip(fmt.Sprintf("Liqo's network test needs pods of every cluster to reach each other: the bed's pod network is %s (FLOTILLA_E2E_SECONDARY_POD_NETWORK), the primary's real node: %v",
				secondaryPodNetwork, realNodeErr))
		}
		labels := map[string]string{"app": "netshoot"}
		for _, c := range bed.Secondaries {
			l := map[string]string{"app": "netshoot", "cluster": c.Name}
			deployment(ctx, "netshoot-"+c.Name, electedFor(c.Name, l, appContainer("netshoot", nil)))
		}
		deployment(ctx, "netshoot-primary", corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "netshoot", "cluster": testbed.PrimaryName}},
			Spec: onRealNode(appContainer("netshoot", nil))})
		svc, err := bed.Primary.Clientset.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "netshoot"},
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		// The consumer: exactly one EndpointSlice, holding every pod (Liqo waits 60 s for it).
		endpoints := map[string]string{} // IP: pod
		Eventually(func(g Gomega) {
			slices, err := bed.Primary.Clientset.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=netshoot"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(slices.Items).To(HaveLen(1))
			endpoints = map[string]string{}
			for _, e := range slices.Items[0].Endpoints {
				g.Expect(e.Conditions.Ready).To(HaveValue(BeTrue()), "endpoint %v", e.Addresses)
				g.Expect(e.TargetRef).NotTo(BeNil())
				endpoints[e.Addresses[0]] = e.TargetRef.Name
			}
			g.Expect(endpoints).To(HaveLen(3))
		}).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

		// Each cluster's Service: the primary's, and the copy Flotilla made in each secondary.
		serviceIP := map[string]string{testbed.PrimaryName: svc.Spec.ClusterIP}
		for _, c := range bed.Secondaries {
			Eventually(func(g Gomega) {
				copied, err := c.Clientset.CoreV1().Services(ns).Get(ctx, "netshoot", metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				serviceIP[c.Name] = copied.Spec.ClusterIP
			}).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		}

		pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=netshoot"})
		Expect(err).NotTo(HaveOccurred())
		Expect(pods.Items).To(HaveLen(3))
		for _, from := range pods.Items {
			cluster := from.Labels["cluster"]
			var script strings.Builder
			for ip := range endpoints {
				fmt.Fprintf(&script, "wget -qO- http://%s:8080/pod-to-pod; ", ip)
			}
			// Liqo curls the Service twice per replica.
			calls := 2 * len(endpoints)
			for range calls {
				fmt.Fprintf(&script, "wget -qO- http://%s:8080/pod-to-service; ", serviceIP[cluster])
			}
			// From the pod itself, through the primary: kubectl exec, as Liqo runs its checks
			// (for an elected pod, in its delegate).
			Eventually(func(g Gomega) {
				out, err := kubectlIn(ctx, ns, nil, "exec", from.Name, "--", "sh", "-c", script.String())
				g.Expect(err).NotTo(HaveOccurred(), out)
				answers := strings.Split(strings.TrimSpace(out), "\n")
				g.Expect(answers).To(HaveLen(len(endpoints)+calls), "from %s (%s):\n%s", from.Name, cluster, out)
				for ip := range endpoints {
					g.Expect(out).To(ContainSubstring("pod="+endpoints[ip]+" "), "from %s (%s) to %s", from.Name, cluster, ip)
				}
				for _, a := range answers[len(endpoints):] {
					name := strings.TrimPrefix(strings.Fields(a)[0], "pod=")
					if cluster == testbed.PrimaryName {
						g.Expect(slices.Collect(maps.Values(endpoints))).To(ContainElement(name), "from %s: the primary's Service answered by a pod it does not select", from.Name)
					} else {
						g.Expect(name).To(HavePrefix("netshoot-"+cluster+"-"), "from %s: %s's copy of the Service answered by a pod of another cluster", from.Name, cluster)
					}
				}
			}).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		}
	}, SpecTimeout(5*time.Minute))

	// offloadingpolicies_test.go: a remote workload becomes Ready (1 replica ready within 1
	// minute); one that may not be offloaded stays unready for 30 s.
	It("offloading policies: an elected Deployment is ready within 1 minute, and one forced onto a virtual node without being elected stays unready for 30 s, says why, and goes when deleted", func(ctx SpecContext) {
		deployment(ctx, "remote", electedFor("", map[string]string{"app": "remote"}, appContainer("nginx", nil)))
		forced := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "forced"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{appContainer("nginx", nil)},
				NodeSelector: map[string]string{corev1.LabelHostname: flotillav1.VirtualNodeName(bed.Secondaries[0].Name)},
				Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}}
		deployment(ctx, "forced", forced)
		if bed.RealNode != nil {
			deployment(ctx, "local", corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "local"}},
				Spec: onRealNode(appContainer("nginx", nil))})
			Eventually(readyReplicas(ctx, "local")).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(Equal(int32(1)))
		}
		Eventually(readyReplicas(ctx, "remote")).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(Equal(int32(1)))
		Consistently(readyReplicas(ctx, "forced")).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(interval).Should(BeZero())
		// Flotilla, the virtual node's kubelet, says why on the pod (kubectl get pods: STATUS
		// NotElected), and lets it go when it is deleted: nothing runs it.
		Eventually(func(g Gomega) {
			pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=forced"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(HaveLen(1))
			g.Expect(pods.Items[0].Status.Phase).To(Equal(corev1.PodPending))
			g.Expect(pods.Items[0].Status.Reason).To(Equal(flotillav1.ReasonNotElected))
		}).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		Expect(bed.Primary.Clientset.AppsV1().Deployments(ns).Delete(ctx, "forced", metav1.DeleteOptions{})).To(Succeed())
		Eventually(func(g Gomega) {
			pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=forced"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(BeEmpty(), "an unelected pod bound to a virtual node, deleted")
		}).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		for _, c := range bed.Secondaries {
			there, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=forced"})
			Expect(err).NotTo(HaveOccurred())
			Expect(there.Items).To(BeEmpty(), "nothing of an unelected pod runs in %s", c.Name)
		}
	}, SpecTimeout(4*time.Minute))

	// unoffload_test.go: a Deployment, its Service and a ConfigMap offloaded; once the offload
	// ends, no pod, Service, ConfigMap or namespace is left in the providers within 1 minute.
	It("unoffload: once the elected Deployment is deleted, no pod, Service, ConfigMap or namespace of it is left in the providers within 1 minute", func(ctx SpecContext) {
		const space = "liqo-e2e-unoffload"
		_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: space, Labels: map[string]string{flotillav1.LabelEnabled: "true"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { deleteNamespaceEverywhere(ctx, space) }, NodeTimeout(3*time.Minute))
		_, err = bed.Primary.Clientset.CoreV1().ConfigMaps(space).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "test-configmap"},
			Data: map[string]string{"key": "value"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		labels := map[string]string{"app": "nginx"}
		// Flotilla copies what a delegate uses: the pod reads the ConfigMap (Liqo reflects every
		// ConfigMap of an offloaded namespace).
		c := appContainer("nginx", nil)
		c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "test-configmap"}}}}
		one := int32(1)
		_, err = bed.Primary.Clientset.AppsV1().Deployments(space).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "nginx"},
			Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: electedFor("", labels, c)}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = bed.Primary.Clientset.CoreV1().Services(space).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "nginx"},
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		var provider *testbed.Cluster
		Eventually(func(g Gomega) {
			pods, err := bed.Primary.Clientset.CoreV1().Pods(space).List(ctx, metav1.ListOptions{LabelSelector: "app=nginx"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(HaveLen(1))
			g.Expect(pods.Items[0].Status.Phase).To(Equal(corev1.PodRunning))
			cluster, ok := flotillav1.ClusterOfNode(pods.Items[0].Spec.NodeName)
			g.Expect(ok).To(BeTrue(), "on a virtual node: %s", pods.Items[0].Spec.NodeName)
			provider = nil
			for _, c := range bed.Secondaries {
				if c.Name == cluster {
					provider = c
				}
			}
			g.Expect(provider).NotTo(BeNil(), "cluster %s", cluster)
			there, err := provider.Clientset.CoreV1().Pods(space).List(ctx, metav1.ListOptions{LabelSelector: "app=nginx"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(there.Items).To(ContainElement(HaveField("Status.Phase", corev1.PodRunning)))
		}).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		Eventually(func(g Gomega) {
			_, err := provider.Clientset.CoreV1().Services(space).Get(ctx, "nginx", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			_, err = provider.Clientset.CoreV1().ConfigMaps(space).Get(ctx, "test-configmap", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
		}).WithContext(ctx).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())

		Expect(bed.Primary.Clientset.AppsV1().Deployments(space).Delete(ctx, "nginx", metav1.DeleteOptions{})).To(Succeed())
		Eventually(func(g Gomega) {
			for _, c := range bed.Secondaries {
				pods, err := c.Clientset.CoreV1().Pods(space).List(ctx, metav1.ListOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(pods.Items).To(BeEmpty(), "pods in %s", c.Name)
				_, err = c.Clientset.CoreV1().Services(space).Get(ctx, "nginx", metav1.GetOptions{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Service in %s: %v", c.Name, err)
				_, err = c.Clientset.CoreV1().ConfigMaps(space).Get(ctx, "test-configmap", metav1.GetOptions{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the ConfigMap in %s: %v", c.Name, err)
				_, err = c.Clientset.CoreV1().Namespaces().Get(ctx, space, metav1.GetOptions{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the namespace in %s: %v", c.Name, err)
			}
		}).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	}, SpecTimeout(4*time.Minute))

	// apiserver_interaction_test.go: an offloaded Job succeeds, and its log read through the
	// consumer is the consumer pod's name.
	It("API server interaction: an elected Job succeeds, and its log read through the primary is its proxy's name", func(ctx SpecContext) {
		tmpl := electedFor("", map[string]string{"app": "whoami"}, appContainer("whoami", []string{"sh", "-c", "echo $POD_NAME"}))
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
		_, err := bed.Primary.Clientset.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "whoami"},
			Spec: batchv1.JobSpec{Template: tmpl}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			j, err := bed.Primary.Clientset.BatchV1().Jobs(ns).Get(ctx, "whoami", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(j.Status.Succeeded).To(Equal(int32(1)))
		}).WithContext(ctx).WithTimeout(180 * time.Second).WithPolling(time.Second).Should(Succeed())
		pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=whoami"})
		Expect(err).NotTo(HaveOccurred())
		Expect(pods.Items).To(HaveLen(1))
		out, err := kubectlIn(ctx, ns, nil, "logs", "job/whoami")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(strings.TrimSpace(out)).To(Equal(pods.Items[0].Name))
	}, SpecTimeout(4*time.Minute))
})
