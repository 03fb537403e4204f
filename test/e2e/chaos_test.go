package e2e

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// identityWatch polls every secondary for the pods of one StatefulSet and records each moment two
// pods of one identity (name) exist at once anywhere. A secondary that does not answer counts
// with what it held when last seen: its pods may still run there.
type identityWatch struct {
	mu         sync.Mutex
	lastSeen   map[string][]string // cluster → names of live pods
	violations []string
	polls      int
	// every is the time between polls (0: 250 ms).
	every time.Duration
}

func (w *identityWatch) run(ctx context.Context, namespace, selector string, clusters []*testbed.Cluster) {
	w.lastSeen = map[string][]string{}
	for ctx.Err() == nil {
		for _, c := range clusters {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			pods, err := c.Clientset.CoreV1().Pods(namespace).List(pctx, metav1.ListOptions{LabelSelector: selector})
			cancel()
			if err != nil {
				continue // unreachable: keep what it held
			}
			var names []string
			for _, p := range pods.Items {
				// Terminating counts: its containers may still run.
				if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
					names = append(names, p.Name)
				}
			}
			w.mu.Lock()
			w.lastSeen[c.Name] = names
			w.mu.Unlock()
		}
		w.check()
		select {
		case <-ctx.Done():
		case <-time.After(cmp.Or(w.every, 250*time.Millisecond)):
		}
	}
}

func (w *identityWatch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.polls++
	where := map[string][]string{}
	for cluster, names := range w.lastSeen {
		for _, n := range names {
			where[n] = append(where[n], cluster)
		}
	}
	for name, clusters := range where {
		if len(clusters) > 1 {
			sort.Strings(clusters)
			w.violations = append(w.violations, fmt.Sprintf("%s: %s in %s at once", time.Now().Format(time.RFC3339Nano), name, strings.Join(clusters, " and ")))
		}
	}
}

// runningProxies counts the pods of a namespace of the primary matching selector that are Running
// and not terminating, on node ("": any node).
func runningProxies(ctx context.Context, g Gomega, namespace, selector, node string) int {
	pods, err := bed.Primary.Clientset.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	g.Expect(err).NotTo(HaveOccurred())
	n := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && (node == "" || p.Spec.NodeName == node) {
			n++
		}
	}
	return n
}

func (w *identityWatch) result() (violations []string, polls int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.violations...), w.polls
}

var _ = Describe("a manager that crashes", Serial, Label("disruptive"), func() {
	It("is SIGKILLed three times during a 200-pod rollout and once during a failover: then exactly one delegate per proxy, none lost, no proxy stuck, and a StatefulSet never runs one identity twice", func(ctx SpecContext) {
		joinBothSecondaries(ctx)
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		const ns = "chaos"
		_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{flotillav1.LabelEnabled: "true"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(bed.Primary.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})).To(Succeed())
		})
		for _, c := range bed.Secondaries {
			prepareNamespace(ctx, c, ns)
		}

		crash := func(when string) {
			GinkgoWriter.Printf("SIGKILL of the manager %s\n", when)
			Expect(manager.Kill()).To(Succeed())
			var err error
			manager, err = startManager(managerBin, managerKubeconfig, filepath.Join(workDir, "manager.log"))
			Expect(err).NotTo(HaveOccurred())
			Eventually(func() (int, error) { return httpStatus(http.DefaultClient, manager.probeURL+"/healthz") }).
				WithContext(ctx).WithTimeout(30 * time.Second).Should(Equal(http.StatusOK))
		}

		// The StatefulSet's identities are watched in both secondaries from before it exists.
		var watch identityWatch
		wctx, stopWatch := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(watched)
			watch.run(wctx, ns, "app=ordered", bed.Secondaries)
		}()
		DeferCleanup(func() { stopWatch(); <-watched })

		three, many := int32(3), int32(200)
		ordered := map[string]string{"app": "ordered"}
		_, err = bed.Primary.Clientset.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "ordered"},
			Spec: appsv1.StatefulSetSpec{Replicas: &three, ServiceName: "ordered", Selector: &metav1.LabelSelector{MatchLabels: ordered},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: ordered, Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationFailoverSeconds: "10"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		rollout := map[string]string{"app": "rollout"}
		_, err = bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "rollout"},
			Spec: appsv1.DeploymentSpec{Replicas: &many, Selector: &metav1.LabelSelector{MatchLabels: rollout}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: rollout, Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationFailoverSeconds: "10"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		running := func(g Gomega, selector, node string) int { return runningProxies(ctx, g, ns, selector, node) }
		start := time.Now()
		time.Sleep(2 * time.Second)
		crash("while the proxies are being created")
		for _, at := range []int{60, 130} {
			Eventually(func(g Gomega) int { return running(g, "app=rollout", "") }).WithContext(ctx).WithTimeout(2 * time.Minute).
				Should(BeNumerically(">=", at))
			crash(fmt.Sprintf("with %d of 200 replicas Running", at))
		}
		Eventually(func(g Gomega) {
			g.Expect(running(g, "app=rollout", "")).To(Equal(200))
			g.Expect(running(g, "app=ordered", "")).To(Equal(3))
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("200-pod rollout through three SIGKILLs", time.Since(start).Round(time.Second).String())

		// A failover, and a crash in the middle of it.
		startAgain := stopForSpec(ctx, s2)
		Eventually(func(g Gomega) {
			n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, flotillav1.VirtualNodeName(s2.Name), metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Spec.Taints).To(ContainElement(HaveField("Key", flotillav1.TaintUnreachable)))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		crash("during the failover")
		start = time.Now()
		Eventually(func(g Gomega) int { return running(g, "app=rollout", flotillav1.VirtualNodeName(s1.Name)) }).
			WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Equal(200))
		AddReportEntry("failover of the at-least-once replicas through a SIGKILL", time.Since(start).Round(time.Second).String())
		startAgain(ctx)

		// Whole again: one live delegate per proxy, nothing else, nothing Pending or stuck.
		start = time.Now()
		Eventually(func(g Gomega) {
			proxies, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			want := map[string]string{}
			for _, p := range proxies.Items {
				g.Expect(p.DeletionTimestamp).To(BeNil(), "proxy %s is stuck terminating", p.Name)
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "proxy %s", p.Name)
				want[string(p.UID)] = p.Name
			}
			g.Expect(want).To(HaveLen(203))
			got := map[string]int{}
			for _, c := range bed.Secondaries {
				for _, d := range delegatesIn(ctx, c, ns) {
					uid := d.Annotations[flotillav1.AnnotationProxyUID]
					g.Expect(want).To(HaveKey(uid), "delegate %s in %s has no proxy", d.Name, c.Name)
					got[uid]++
				}
			}
			for uid, name := range want {
				g.Expect(got[uid]).To(Equal(1), "delegates of proxy %s", name)
			}
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		AddReportEntry("whole again after the secondary's return", time.Since(start).Round(time.Second).String())

		stopWatch()
		<-watched
		violations, polls := watch.result()
		Expect(polls).To(BeNumerically(">", 100), "the identity watch ran")
		Expect(violations).To(BeEmpty(), "a StatefulSet identity ran twice")
		AddReportEntry("StatefulSet identity checks", fmt.Sprint(polls))
	}, SpecTimeout(15*time.Minute))
})
