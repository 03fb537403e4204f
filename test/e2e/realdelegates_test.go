package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// Real delegates: containers started by a real kubelet in each secondary (its real node), from
// the bed's application image. kwok pods imitate a container; these are one.
var _ = Describe("real delegates", Ordered, Label("real-nodes"), func() {
	const ns = "real-delegates"

	BeforeAll(func(ctx SpecContext) {
		requireSecondaryRealNodes()
		joinBothSecondaries(ctx)
		importAppImage(ctx, false)
		enabledNamespace(ctx, ns)
	})

	It("serves HTTP from every delegate of an elected Deployment through its secondary's Service, and logs each request", func(ctx SpecContext) {
		labels := map[string]string{"app": "web"}
		replicas := int32(4)
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{
			Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
				Spec: onRealNode(appContainer("web", nil))},
		}}
		_, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = bed.Primary.Clientset.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		// Every proxy Running and Ready (the real readiness probe), two in each secondary.
		perCluster := map[string][]string{}
		Eventually(func(g Gomega) {
			proxies, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(proxies.Items).To(HaveLen(4))
			perCluster = map[string][]string{}
			for i := range proxies.Items {
				p := &proxies.Items[i]
				g.Expect(podReady(p)).To(BeTrue(), "proxy %s: %s %s", p.Name, p.Status.Phase, p.Status.Message)
				cluster, _ := flotillav1.ClusterOfNode(p.Spec.NodeName)
				perCluster[cluster] = append(perCluster[cluster], p.Name)
			}
			g.Expect(perCluster).To(HaveLen(2))
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())

		for _, c := range bed.Secondaries {
			// From a pod of that secondary, through the Service Flotilla copied there: its
			// endpoints are the delegates that run there.
			var svc *corev1.Service
			Eventually(func() error {
				svc, err = c.Clientset.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
				return err
			}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
			url := fmt.Sprintf("http://%s:8080/", svc.Spec.ClusterIP)
			seen := map[string]bool{}
			Eventually(func(g Gomega) {
				out := runInSecondary(g, ctx, c, "client-"+fmt.Sprint(time.Now().UnixNano()%100000), strings.Repeat("wget -qO- "+url+"; ", 20))
				for _, line := range strings.Split(out, "\n") {
					for _, f := range strings.Fields(line) {
						if name, ok := strings.CutPrefix(f, "pod="); ok {
							seen[name] = true
						}
					}
				}
				for _, name := range perCluster[c.Name] {
					g.Expect(seen).To(HaveKey(name), "answers in %s: %v", c.Name, seen)
				}
			}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
			for name := range seen {
				Expect(perCluster[c.Name]).To(ContainElement(name), "only %s's own delegates answer its Service", c.Name)
			}
		}

		// The proxy's log is the real container's: its start line and the requests it served.
		name := perCluster[bed.Secondaries[0].Name][0]
		Eventually(func(g Gomega) {
			raw, err := bed.Primary.Clientset.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(raw)).To(ContainSubstring("serving on"))
			g.Expect(string(raw)).To(ContainSubstring("request GET / from"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	}, SpecTimeout(4*time.Minute))

	It("follows a delegate's log as requests arrive, and attaches, execs with stdin and a TTY, and port-forwards real HTTP, all through the primary", func(ctx SpecContext) {
		_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "talk",
			Annotations: map[string]string{flotillav1.AnnotationElect: ""}}, Spec: onRealNode(appContainer("talk", nil))}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "talk", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(podReady(p)).To(BeTrue(), "proxy talk: %s %s", p.Status.Phase, p.Status.Message)
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

		// kubectl against the primary, as a user runs it: each stream goes through the virtual
		// node's kubelet API to the real kubelet of the delegate's secondary.
		tools, err := testbed.ToolsDir("")
		Expect(err).NotTo(HaveOccurred())
		kubectl := func(args ...string) []string {
			return append([]string{"--kubeconfig", bed.KubeconfigPath, "--context", testbed.PrimaryName, "-n", ns}, args...)
		}
		dir := GinkgoT().TempDir()
		local, err := testbed.FreePort()
		Expect(err).NotTo(HaveOccurred())
		forward, err := testbed.StartProcess("port-forward", filepath.Join(tools, "kubectl"), kubectl("port-forward", "pod/talk", fmt.Sprintf("%d:8080", local)),
			filepath.Join(dir, "port-forward.log"))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = forward.Stop(5 * time.Second) })
		followLog := filepath.Join(dir, "logs-f.log")
		follow, err := testbed.StartProcess("logs -f", filepath.Join(tools, "kubectl"), kubectl("logs", "-f", "talk"), followLog)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = follow.Stop(5 * time.Second) })
		attachLog := filepath.Join(dir, "attach.log")
		attach, err := testbed.StartProcess("attach", filepath.Join(tools, "kubectl"), kubectl("attach", "talk", "-c", "talk"), attachLog)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = attach.Stop(5 * time.Second) })

		// Each request through the port-forward is answered by the delegate's own server, and
		// shows up in the followed log and the attached stream while they stay open.
		for i := range 3 {
			path := fmt.Sprintf("/hello-%d-%d", i, time.Now().UnixNano())
			Eventually(func(g Gomega) {
				g.Expect(localGet(g, local, path)).To(ContainSubstring("pod=talk"))
				for _, file := range []string{followLog, attachLog} {
					raw, err := os.ReadFile(file)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(string(raw)).To(ContainSubstring("request GET "+path+" from"), "in %s", filepath.Base(file))
				}
			}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		}

		// exec -i: standard input reaches the container's process.
		cat := exec.CommandContext(ctx, filepath.Join(tools, "kubectl"), kubectl("exec", "-i", "talk", "--", "cat")...)
		cat.Stdin = strings.NewReader("through standard input\n")
		out, err := cat.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(Equal("through standard input\n"))

		// exec -i -t: a shell on a terminal of the real container (the terminal turns "\n" into
		// "\r\n" on the way out, which only a TTY does).
		req := bed.Primary.Clientset.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name("talk").SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Container: "talk", Command: []string{"sh"}, Stdin: true, Stdout: true, TTY: true}, scheme.ParameterCodec)
		executor, err := remotecommand.NewSPDYExecutor(bed.Primary.RESTConfig, http.MethodPost, req.URL())
		Expect(err).NotTo(HaveOccurred())
		// As a user types: a line, its answer, then exit (a terminal whose input ends at once is
		// hung up before it answers).
		stdin, typing := io.Pipe()
		terminal := &testbed.SyncBuffer{}
		streamCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- executor.StreamWithContext(streamCtx, remotecommand.StreamOptions{Stdin: stdin, Stdout: terminal, Tty: true})
		}()
		_, err = typing.Write([]byte("tty\n"))
		Expect(err).NotTo(HaveOccurred())
		Eventually(terminal.String).WithContext(streamCtx).WithTimeout(20*time.Second).
			Should(MatchRegexp(`/dev/pts/[0-9]+\r\n`), "the shell's answer on its terminal")
		_, err = typing.Write([]byte("exit 0\n"))
		Expect(err).NotTo(HaveOccurred())
		Eventually(done).WithContext(streamCtx).WithTimeout(20*time.Second).Should(Receive(BeNil()), terminal.String())
		_ = typing.Close()
	}, SpecTimeout(3*time.Minute))

	It("shows an image its node cannot pull as ErrImagePull or ImagePullBackOff with the kubelet's message on the proxy, and a Warning Event", func(ctx SpecContext) {
		const image = "registry.invalid/flotilla/absent:1"
		c := appContainer("absent", []string{"sleep", "infinity"})
		c.Image, c.ImagePullPolicy = image, corev1.PullIfNotPresent
		_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "absent",
			Annotations: map[string]string{flotillav1.AnnotationElect: ""}}, Spec: onRealNode(c)}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "absent", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			waiting := p.Status.ContainerStatuses[0].State.Waiting
			g.Expect(waiting).NotTo(BeNil(), "container state %+v", p.Status.ContainerStatuses[0].State)
			g.Expect(waiting.Reason).To(BeElementOf("ErrImagePull", "ImagePullBackOff"))
			g.Expect(waiting.Message).To(ContainSubstring(image))
			events, err := bed.Primary.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=absent"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(events.Items).To(ContainElement(And(HaveField("Type", corev1.EventTypeWarning), HaveField("Message", ContainSubstring(image)))),
				"Events on the proxy")
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("serves the real container's usage to kubectl top pod on its proxy, and an HPA scales the elected Deployment on it", func(ctx SpecContext) {
		labels := map[string]string{"app": "spin"}
		replicas := int32(1)
		c := appContainer("spin", []string{"spin", "40"})
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
		_, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "spin"},
			Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
					Spec: onRealNode(c)}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = bed.Primary.Clientset.AutoscalingV2().HorizontalPodAutoscalers(ns).Delete(ctx, "spin", metav1.DeleteOptions{})
			_ = bed.Primary.Clientset.AppsV1().Deployments(ns).Delete(ctx, "spin", metav1.DeleteOptions{})
		})
		var proxy string
		Eventually(func(g Gomega) {
			pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=spin"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(HaveLen(1))
			g.Expect(pods.Items[0].Status.Phase).To(Equal(corev1.PodRunning))
			proxy = pods.Items[0].Name
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		// At 50 % of its 100m request: the container's 400m is far above, so it scales to its maximum.
		_, err = bed.Primary.Clientset.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "spin"},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "spin"},
				MinReplicas:    &replicas, MaxReplicas: 2,
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
					Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}},
			}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		// kubectl top pod on the proxy, through the primary's metrics API: the real container's
		// CPU (kwok's pods show 1m unless told otherwise) and memory.
		top := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(proxy) + `\s+(\d+)m\s+(\d+)Mi\s*$`)
		Eventually(func(g Gomega) {
			out, err := kubectlIn(ctx, ns, nil, "top", "pod", proxy)
			g.Expect(err).NotTo(HaveOccurred(), out)
			m := top.FindStringSubmatch(out)
			g.Expect(m).NotTo(BeNil(), out)
			cpu, _ := strconv.Atoi(m[1])
			mem, _ := strconv.Atoi(m[2])
			g.Expect(cpu).To(BeNumerically(">=", 150), "CPU of a container spinning 40 %% of a core: %s", out)
			g.Expect(mem).To(BeNumerically(">=", 1), out)
			AddReportEntry("kubectl top pod on a real delegate", strings.TrimSpace(out))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())

		Eventually(func(g Gomega) {
			d, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Get(ctx, "spin", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(2)), "the HPA scales on the real usage")
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	}, SpecTimeout(5*time.Minute))

	It("shows a crashing container's restarts, CrashLoopBackOff and exit code on the proxy, as the kubelet reports them", func(ctx SpecContext) {
		c := appContainer("crash", []string{"sh", "-c", "echo starting; exit 3"})
		_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "crash",
			Annotations: map[string]string{flotillav1.AnnotationElect: ""}}, Spec: onRealNode(c)}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "crash", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			st := p.Status.ContainerStatuses[0]
			g.Expect(st.RestartCount).To(BeNumerically(">=", 1))
			g.Expect(st.LastTerminationState.Terminated).NotTo(BeNil())
			g.Expect(st.LastTerminationState.Terminated.ExitCode).To(Equal(int32(3)))
			g.Expect(st.State.Waiting).NotTo(BeNil())
			g.Expect(st.State.Waiting.Reason).To(Equal("CrashLoopBackOff"))
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("sends SIGTERM to the real container when its proxy is deleted: it drains, exits, and only then the proxy goes", func(ctx SpecContext) {
		grace := int64(20)
		spec := onRealNode(appContainer("drain", nil))
		spec.TerminationGracePeriodSeconds = &grace
		spec.Containers[0].Env = append(spec.Containers[0].Env, corev1.EnvVar{Name: "DRAIN", Value: "1s"})
		_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "drain",
			Annotations: map[string]string{flotillav1.AnnotationElect: ""}}, Spec: spec}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		var cluster *testbed.Cluster
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "drain", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(podReady(p)).To(BeTrue())
			name, _ := flotillav1.ClusterOfNode(p.Spec.NodeName)
			for _, c := range bed.Secondaries {
				if c.Name == name {
					cluster = c
				}
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		// Follow the delegate's own log in its secondary until the container ends.
		stream, err := cluster.Clientset.CoreV1().Pods(ns).GetLogs("drain", &corev1.PodLogOptions{Follow: true}).Stream(ctx)
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = stream.Close() }()
		Expect(bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, "drain", metav1.DeleteOptions{})).To(Succeed())
		var log strings.Builder
		scanner := bufio.NewScanner(stream)
		for scanner.Scan() {
			log.WriteString(scanner.Text() + "\n")
			// The proxy is still there while the container drains.
			if strings.Contains(scanner.Text(), "draining") {
				_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "drain", metav1.GetOptions{})
				Expect(err).NotTo(HaveOccurred(), "the proxy went before its container exited")
			}
		}
		Expect(log.String()).To(ContainSubstring("terminated: draining"))
		Expect(log.String()).To(ContainSubstring("drained, exiting 0"))
		Eventually(func() bool {
			_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "drain", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(BeTrue())
	}, SpecTimeout(2*time.Minute))

	It("completes a Job whose container exits 0 and fails one that exits 3, its exit code on the proxy", func(ctx SpecContext) {
		for _, tc := range []struct {
			name string
			code int
		}{{"job-ok", 0}, {"job-fails", 3}} {
			spec := onRealNode(appContainer("job", []string{"sh", "-c", fmt.Sprintf("echo working; exit %d", tc.code)}))
			spec.RestartPolicy = corev1.RestartPolicyNever
			backoff := int32(0)
			_, err := bed.Primary.Clientset.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: tc.name},
				Spec: batchv1.JobSpec{BackoffLimit: &backoff, Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{flotillav1.AnnotationElect: ""}}, Spec: spec}}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(func(g Gomega) {
			ok, err := bed.Primary.Clientset.BatchV1().Jobs(ns).Get(ctx, "job-ok", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok.Status.Succeeded).To(Equal(int32(1)))
			failed, err := bed.Primary.Clientset.BatchV1().Jobs(ns).Get(ctx, "job-fails", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(failed.Status.Failed).To(Equal(int32(1)))
			pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=job-fails"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).NotTo(BeEmpty())
			st := pods.Items[0].Status.ContainerStatuses
			g.Expect(st).To(HaveLen(1))
			g.Expect(st[0].State.Terminated).NotTo(BeNil())
			g.Expect(st[0].State.Terminated.ExitCode).To(Equal(int32(3)))
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())
	}, SpecTimeout(2*time.Minute))
})

// A flat pod network (routes between every cluster's pod range, as Submariner or Cilium
// ClusterMesh give) with the manager's --pod-network=flat: a proxy carries its delegate's IP, and
// the primary's own pods and Services reach delegates in the secondaries.
var _ = Describe("real delegates on a flat pod network", Ordered, Label("real-nodes"), func() {
	const ns = "flat-delegates"

	BeforeAll(func(ctx SpecContext) { flatRealNodes(ctx, ns) })

	var proxies map[string]string // proxy name: its IP
	var serviceIP string

	It("gives each proxy its delegate's IP, and a pod of the primary reaches every delegate at it and through the primary's Service", func(ctx SpecContext) {
		labels := map[string]string{"app": "flat"}
		replicas := int32(4)
		_, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "flat"},
			Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
					Spec: onRealNode(appContainer("web", nil))}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		svc, err := bed.Primary.Clientset.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "flat"},
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		serviceIP = svc.Spec.ClusterIP

		Eventually(func(g Gomega) {
			list, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=flat"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(list.Items).To(HaveLen(4))
			proxies = map[string]string{}
			clusters := map[string]bool{}
			for i := range list.Items {
				p := &list.Items[i]
				g.Expect(podReady(p)).To(BeTrue(), "proxy %s: %s %s", p.Name, p.Status.Phase, p.Status.Message)
				g.Expect(p.Status.PodIP).NotTo(BeEmpty(), "proxy %s: a flat network gives it its delegate's IP", p.Name)
				g.Expect(p.Status.PodIP).To(Equal(p.Annotations[flotillav1.AnnotationDelegateIP]), "proxy %s", p.Name)
				proxies[p.Name] = p.Status.PodIP
				cluster, _ := flotillav1.ClusterOfNode(p.Spec.NodeName)
				clusters[cluster] = true
			}
			g.Expect(clusters).To(HaveLen(2), "delegates in both secondaries")
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())

		// From a pod on the primary's real node: each proxy's IP is its delegate, in its
		// secondary; the Service of the primary reaches them all.
		var script strings.Builder
		for _, ip := range proxies {
			fmt.Fprintf(&script, "wget -qO- http://%s:8080/direct; ", ip)
		}
		script.WriteString(strings.Repeat(fmt.Sprintf("wget -qO- http://%s:8080/service; ", serviceIP), 24))
		seen := map[string]bool{}
		Eventually(func(g Gomega) {
			out := runInCluster(g, ctx, bed.Primary, ns, fmt.Sprintf("client-%d", time.Now().UnixNano()%100000), script.String())
			for name := range proxies {
				g.Expect(out).To(ContainSubstring("pod="+name+" "), "a delegate at its proxy's IP answers with its proxy's name")
			}
			for _, f := range strings.Fields(out) {
				if name, ok := strings.CutPrefix(f, "pod="); ok {
					seen[name] = true
				}
			}
			g.Expect(len(seen)).To(BeNumerically(">=", 3), "the primary's Service spreads over the delegates: %v", seen)
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())
	}, SpecTimeout(4*time.Minute))

	It("makes a proxy NotReady and drops it from the primary's EndpointSlice when its container's readiness probe fails, and brings it back", func(ctx SpecContext) {
		Expect(proxies).NotTo(BeEmpty())
		var name, ip string
		for name, ip = range proxies {
			break
		}
		readyIn := func(want bool) {
			Eventually(func(g Gomega) {
				p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(podReady(p)).To(Equal(want), "proxy %s Ready", name)
				slices, err := bed.Primary.Clientset.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=flat"})
				g.Expect(err).NotTo(HaveOccurred())
				found := false
				for _, s := range slices.Items {
					for _, e := range s.Endpoints {
						if len(e.Addresses) > 0 && e.Addresses[0] == ip {
							found = true
							g.Expect(e.Conditions.Ready).NotTo(BeNil())
							g.Expect(*e.Conditions.Ready).To(Equal(want), "the endpoint %s of proxy %s ready", ip, name)
						}
					}
				}
				g.Expect(found).To(BeTrue(), "proxy %s (%s) in the primary's EndpointSlice", name, ip)
			}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		}
		Eventually(func(g Gomega) {
			out := runInCluster(g, ctx, bed.Primary, ns, fmt.Sprintf("off-%d", time.Now().UnixNano()%100000), fmt.Sprintf("wget -qO- http://%s:8080/ready/off", ip))
			g.Expect(out).To(ContainSubstring("ready off"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		readyIn(false)
		Eventually(func(g Gomega) {
			out := runInCluster(g, ctx, bed.Primary, ns, fmt.Sprintf("on-%d", time.Now().UnixNano()%100000), fmt.Sprintf("wget -qO- http://%s:8080/ready/on", ip))
			g.Expect(out).To(ContainSubstring("ready on"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		readyIn(true)
	}, SpecTimeout(3*time.Minute))
})
