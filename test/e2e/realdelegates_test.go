package e2e

import (
	"bufio"
	"fmt"
	"path/filepath"
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

// Real delegates: containers started by a real kubelet in each secondary (its real node), from
// the bed's application image. kwok pods imitate a container; these are one.
var _ = Describe("real delegates", Ordered, Label("real-nodes"), func() {
	const ns = "real-delegates"

	BeforeAll(func(ctx SpecContext) {
		for _, c := range bed.Secondaries {
			if c.RealNode == nil {
				Skip(fmt.Sprintf("secondary %s has no real node: %v", c.Name, secondaryRealNodesErr))
			}
		}
		joinBothSecondaries(ctx)
		tar, err := testbed.BuildTestAppImage(ctx, filepath.Join(workDir, "images"))
		Expect(err).NotTo(HaveOccurred())
		for _, c := range bed.Secondaries {
			Expect(c.RealNode.ImportImage(ctx, tar)).To(Succeed())
		}
		_, err = bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{flotillav1.LabelEnabled: "true"}}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		DeferCleanup(func(ctx SpecContext) {
			_ = bed.Primary.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		})
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

// appContainer is a container of the bed's application image: its HTTP server (with a
// readiness probe) when command is nil, else the command.
func appContainer(name string, command []string) corev1.Container {
	c := corev1.Container{Name: name, Image: testbed.TestAppImage, ImagePullPolicy: corev1.PullNever, Command: command,
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		}}
	if command == nil {
		c.Ports = []corev1.ContainerPort{{ContainerPort: 8080}}
		c.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}}}
	}
	return c
}

// onRealNode is a pod spec of one container that runs only on a real node: the delegate gets the
// node selector and toleration, so a secondary's real node is where it lands.
func onRealNode(c corev1.Container) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{c},
		NodeSelector: map[string]string{testbed.RealNodeKey: "true"},
		Tolerations:  []corev1.Toleration{{Key: testbed.RealNodeKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}
}

// runInSecondary runs a script in a pod of the application image on a secondary's real node and
// returns its output once it has completed.
func runInSecondary(g Gomega, ctx SpecContext, c *testbed.Cluster, name, script string) string {
	spec := onRealNode(appContainer("client", []string{"sh", "-c", script}))
	spec.RestartPolicy = corev1.RestartPolicyNever
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	pods := c.Clientset.CoreV1().Pods("real-delegates")
	_, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			break
		}
		g.Expect(time.Now().Before(deadline)).To(BeTrue(), "client pod %s in %s not done in 30 s: %s", name, c.Name, p.Status.Phase)
		time.Sleep(500 * time.Millisecond)
	}
	raw, err := pods.GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	return string(raw)
}
