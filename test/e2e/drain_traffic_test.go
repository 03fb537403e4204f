package e2e

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// A drain under traffic, on real containers and the flat pod network: a client on the primary's
// real node calls the primary's Service of an elected Deployment in a loop while the Deployment
// is rolled in its one cluster (the baseline: what a single cluster's rolling update loses), then
// while `cluster drain` moves it to the other cluster. The drain loses no more than the baseline.
var _ = Describe("cluster drain under traffic", Ordered, Serial, Label("disruptive", "real-nodes"), func() {
	const ns = "drain-traffic"

	BeforeAll(func(ctx SpecContext) {
		flatRealNodes(ctx, ns)
		DeferCleanup(func(ctx SpecContext) {
			for _, c := range bed.Secondaries {
				setUnschedulable(ctx, c.Name, false)
			}
		})
	})

	// clientLoop starts a pod on the primary's real node that calls url up to 1800 times, 50 ms
	// apart, printing OK or FAILED for each, and stops early, within 10 calls, once told to; done
	// tells it, and returns its counts once it has finished. It runs as long as what it measures,
	// plus a moment: its 1800 calls must outlast the slowest move, and mostly measured nothing
	// when they all ran. The application image's shell has no loops: the script is the calls
	// written out, checking for the stop every 10 of them (one argument of exec may not pass
	// 128 KiB).
	clientLoop := func(ctx SpecContext, name, url string) (running func() bool, done func() (ok, failed int)) {
		const signal = "/signal"
		calls := strings.Repeat("wget -qO- $URL && echo OK || echo FAILED; sleep 0.05; ", 10)
		script := strings.Repeat(fmt.Sprintf("[ -d %s/stop ] && exit 0; %s", signal, calls), 180)
		client := appContainer("client", []string{"sh", "-c", script})
		client.Env = append(client.Env, corev1.EnvVar{Name: "URL", Value: url})
		client.VolumeMounts = []corev1.VolumeMount{{Name: "signal", MountPath: signal}}
		spec := onRealNode(client)
		spec.RestartPolicy = corev1.RestartPolicyNever
		spec.Volumes = []corev1.Volume{{Name: "signal", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		pods := bed.Primary.Clientset.CoreV1().Pods(ns)
		_, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) corev1.PodPhase {
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			return p.Status.Phase
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Equal(corev1.PodRunning))
		running = func() bool {
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.Status.Phase == corev1.PodRunning
		}
		done = func() (int, int) {
			out, err := kubectlIn(ctx, ns, nil, "exec", name, "--", "mkdir", signal+"/stop")
			Expect(err).NotTo(HaveOccurred(), out)
			Eventually(func(g Gomega) corev1.PodPhase {
				p, err := pods.Get(ctx, name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				return p.Status.Phase
			}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Equal(corev1.PodSucceeded))
			raw, err := pods.GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
			Expect(err).NotTo(HaveOccurred())
			logs := string(raw)
			return strings.Count(logs, "OK\n"), strings.Count(logs, "FAILED\n")
		}
		return running, done
	}

	It("loses no more requests moving an elected Deployment of 6 to the other cluster than a rolling update in one cluster loses", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		setUnschedulable(ctx, s2.Name, true)
		Eventually(func(g Gomega) { expectNotPlaceableIn(g, ctx, s2.Name) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		// The backend a Service's users deploy: its pods keep serving for a few seconds after
		// their deletion starts (a preStop sleep), the time the client's kube-proxy takes to drop
		// the endpoint (its iptables sync runs at most once a second). Without it, every pod's end
		// loses whatever the client sends it in that second: a number that varies from 0 to 5 in
		// either run and would drown what this spec measures.
		web := appContainer("web", nil)
		web.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}
		six := int32(6)
		sel := map[string]string{"app": "served"}
		_, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "served"},
			Spec: appsv1.DeploymentSpec{Replicas: &six, Selector: &metav1.LabelSelector{MatchLabels: sel},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
					Spec: onRealNode(web)}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = bed.Primary.Clientset.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "served"},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: sel}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		svc, err := bed.Primary.Clientset.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "served"},
			Spec: corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		url := fmt.Sprintf("http://%s:8080/", svc.Spec.ClusterIP)
		settled := func(cluster string) {
			Eventually(func(g Gomega) {
				g.Expect(readyProxiesOn(ctx, g, ns, "app=served", cluster)).To(Equal(6))
				d, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Get(ctx, "served", metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				// The Deployment controller has seen the latest change: before, its status is the
				// last rollout's, settled already.
				g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
				g.Expect(d.Status.UpdatedReplicas).To(Equal(six))
				g.Expect(d.Status.Replicas).To(Equal(six), "no old pod left")
			}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		}
		settled(s1.Name)

		// The baseline: a rolling update within secondary1 (secondary2 still cordoned).
		running, done := clientLoop(ctx, "baseline", url)
		_, err = bed.Primary.Clientset.AppsV1().Deployments(ns).Patch(ctx, "served", types.MergePatchType,
			[]byte(`{"spec":{"template":{"metadata":{"annotations":{"e2e/restarted":"yes"}}}}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		settled(s1.Name)
		Expect(running()).To(BeTrue(), "the baseline's client loop ran all through the rolling update")
		baseOK, baseFailed := done()

		// The drain, secondary2 open again.
		setUnschedulable(ctx, s2.Name, false)
		Eventually(func(g Gomega) { expectPlaceableIn(g, ctx, s2.Name) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		running, done = clientLoop(ctx, "during-drain", url)
		start := time.Now()
		out, err := flotillactl(ctx, "cluster", "drain", s1.Name, "--timeout", "3m")
		Expect(err).NotTo(HaveOccurred(), out)
		took := time.Since(start)
		DeferCleanup(func(ctx SpecContext) { _, _ = flotillactl(ctx, "cluster", "uncordon", s1.Name) })
		settled(s2.Name)
		Expect(running()).To(BeTrue(), "the client loop ran all through the drain")
		drainOK, drainFailed := done()

		AddReportEntry("requests lost: rolling update in one cluster (baseline)", fmt.Sprintf("%d of %d", baseFailed, baseOK+baseFailed))
		AddReportEntry("requests lost: drain to the other cluster", fmt.Sprintf("%d of %d (drain took %s)", drainFailed, drainOK+drainFailed, took.Round(100*time.Millisecond)))
		// Each loop ran from before its move began until the move had settled (checked above), and
		// called the Service all along: a move takes several seconds (about 10 for the rolling
		// update, 15 for the drain here), and the loop makes more than 10 calls a second.
		const fewestCalls = 50
		Expect(baseOK+baseFailed).To(BeNumerically(">=", fewestCalls), "calls during the rolling update")
		Expect(drainOK+drainFailed).To(BeNumerically(">=", fewestCalls), "calls during the drain")
		// With the preStop sleep, a rolling update loses nothing; the drain must not either, but
		// for a request or two on a machine slow enough that a kube-proxy sync outlasts the sleep.
		// A move that left a gap (old pods gone before new ones are ready, or a delegate stopped
		// before its proxy's deletion began, skipping the sleep's cover) would lose many more:
		// 20 requests a second for as long as the gap lasts.
		const raceNoise = 2
		Expect(drainFailed).To(BeNumerically("<=", baseFailed+raceNoise), "a drain loses no request a rolling update in one cluster would not")
	}, SpecTimeout(12*time.Minute))
})
