package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/internal/ociimage"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// installPrevious puts Flotilla's previous release in cluster, as a user running it has it: its
// manager's image in the real node (tagged with its version), its chart installed over the
// suite's release with the in-cluster values.
func installPrevious(ctx context.Context, prev testbed.PreviousRelease) {
	image := filepath.Join(workDir, "flotilla-manager-"+prev.Version+".tar")
	Expect(ociimage.WriteTarball(ociimage.Spec{Ref: managerImageRepo + ":" + prev.Version, Entrypoint: "/flotilla-manager",
		User: "65532:65532", Binaries: map[string]string{"linux/" + runtime.GOARCH: prev.ManagerBin}}, "linux/"+runtime.GOARCH, image)).To(Succeed())
	Expect(bed.RealNode.ImportImage(ctx, image)).To(Succeed())
	out, err := helm(ctx, bed.Primary, append([]string{"upgrade", "flotilla", prev.Chart, "-n", flotillav1.SystemNamespace,
		"--wait", "--timeout", "90s"}, inClusterValues("--set", "manager.image.tag="+prev.Version)...)...)
	Expect(err).NotTo(HaveOccurred(), "helm upgrade to Flotilla %s in cluster: %s", prev.Version, out)
}

// upgradeToCurrent helm-upgrades the in-cluster release to this code's chart and image, unless
// it runs them already (a spec focused without the upgrade spec before it).
func upgradeToCurrent(ctx context.Context) {
	var d appsv1.Deployment
	Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: "flotilla-manager"}, &d)).To(Succeed())
	if d.Spec.Template.Spec.Containers[0].Image == managerImageRepo+":"+managerImageTag {
		return
	}
	out, err := helm(ctx, bed.Primary, append([]string{"upgrade", "flotilla", "charts/flotilla", "-n", flotillav1.SystemNamespace,
		"--wait", "--timeout", "2m"}, inClusterValues()...)...)
	Expect(err).NotTo(HaveOccurred(), "helm upgrade to this code: %s", out)
}

// proxySampler lists a workload's proxies every interval and keeps every moment one of them was
// not Running and Ready, or the set of proxies was not the one it started with.
type proxySampler struct {
	mu         sync.Mutex
	violations []string
	samples    int
}

func (s *proxySampler) run(ctx context.Context, ns, selector string, want map[string]bool, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			if ctx.Err() == nil {
				s.add(fmt.Sprintf("%s: listing proxies: %v", time.Now().Format(time.StampMilli), err))
			}
			continue
		}
		seen := 0
		for _, p := range pods.Items {
			switch {
			case !want[string(p.UID)]:
				s.add(fmt.Sprintf("%s: proxy %s (uid %s) is new", time.Now().Format(time.StampMilli), p.Name, p.UID))
			case p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || !podReady(&p):
				s.add(fmt.Sprintf("%s: proxy %s is %s, ready %t, deleting %t", time.Now().Format(time.StampMilli), p.Name,
					p.Status.Phase, podReady(&p), p.DeletionTimestamp != nil))
				seen++
			default:
				seen++
			}
		}
		if seen != len(want) {
			s.add(fmt.Sprintf("%s: %d of the %d proxies listed", time.Now().Format(time.StampMilli), seen, len(want)))
		}
		s.mu.Lock()
		s.samples++
		s.mu.Unlock()
	}
}

func (s *proxySampler) add(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.violations = append(s.violations, v)
}

func (s *proxySampler) result() ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.violations, s.samples
}

// podCreator creates a bare elected pod every interval (named prefix-NNN) and keeps every
// creation refused.
type podCreator struct {
	prefix  string
	mu      sync.Mutex
	created int
	refused []string
}

func (c *podCreator) run(ctx context.Context, ns string, labels map[string]string, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%03d", c.prefix, i), Labels: labels,
			Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
			Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		// Its own bound: a call cut by the end of the run is neither made nor refused.
		callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(callCtx, pod, metav1.CreateOptions{})
		cancel()
		c.mu.Lock()
		if err != nil {
			c.refused = append(c.refused, fmt.Sprintf("%s: %s: %v", time.Now().Format(time.StampMilli), pod.Name, err))
		} else {
			c.created++
		}
		c.mu.Unlock()
	}
}

func (c *podCreator) result() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.created, c.refused
}

// delegateStarts maps each delegate of a namespace's pods labelled app=<app>, in every
// secondary, to its UID and its container's start time: a delegate restarted or replaced shows.
func delegateStarts(ctx SpecContext, ns, app string) map[string]string {
	out := map[string]string{}
	for _, c := range bed.Secondaries {
		for _, p := range delegatesIn(ctx, c, ns) {
			if p.Labels["app"] != app {
				continue
			}
			started := "not started"
			if len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil {
				started = p.Status.ContainerStatuses[0].State.Running.StartedAt.UTC().Format(time.RFC3339)
			}
			out[c.Name+"/"+p.Name] = fmt.Sprintf("uid %s, started %s, restarts %d", p.UID, started, restartsOf(p))
		}
	}
	return out
}

func restartsOf(p corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// upgradeUnderLoad is the spec of an upgrade from the previous release: the in-cluster group
// installs that release first, this spec runs the load and upgrades to this code.
func upgradeUnderLoad(ctx SpecContext, prev testbed.PreviousRelease) {
	const (
		ns       = "upgrade-load"
		replicas = 200
	)
	cl := clientOf(bed.Primary)
	s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
	Expect(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{flotillav1.LabelEnabled: "true"}}})).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		// Gone before the next spec: 200 and more delegates leaving later would free room that
		// specs measuring what the primary uses in a secondary count on.
		Expect(client.IgnoreNotFound(cl.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		Eventually(func(g Gomega) {
			var proxies corev1.PodList
			g.Expect(cl.List(ctx, &proxies, client.InNamespace(ns))).To(Succeed())
			g.Expect(proxies.Items).To(BeEmpty(), "proxies of %s left", ns)
			for _, c := range bed.Secondaries {
				g.Expect(delegatesIn(ctx, c, ns)).To(BeEmpty(), "delegates of %s left in %s", ns, c.Name)
			}
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	}, NodeTimeout(4*time.Minute))

	By(fmt.Sprintf("Flotilla %s runs %d elected pods over both secondaries and 3 Replicators", prev.Version, replicas))
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "load"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "load"}},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "load"}, Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}}}}}}}
	Expect(cl.Create(ctx, d)).To(Succeed())
	var reps []*flotillav1.Replicator
	for i := 1; i <= 3; i++ {
		rep := &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("upgrade-copies-%d", i)}, Spec: flotillav1.ReplicatorSpec{
			TargetCluster: []string{s1.Name, s2.Name}, ReplicationNamespace: fmt.Sprintf("upgrade-copies-%d", i),
			ConfigMapName: "settings", ConfigMapData: map[string]string{"copy": fmt.Sprint(i)},
			DeploymentName: "web", DeploymentSpec: &flotillav1.ReplicatedDeploymentSpec{Replicas: ptr.To[int32](1), Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}}}}},
		}}
		Expect(cl.Create(ctx, rep)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, rep))).To(Succeed()) })
		reps = append(reps, rep)
	}
	// syncedSince waits until every Replicator had a whole pass in both secondaries after t.
	syncedSince := func(t time.Time) {
		Eventually(func(g Gomega) {
			for _, rep := range reps {
				got, err := replicatorStatus(ctx, rep.Name)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got.Status.Synced).To(Equal(flotillav1.SyncedTrue), "Replicator %s", rep.Name)
				for _, c := range []string{s1.Name, s2.Name} {
					g.Expect(got.Status.Clusters).To(ContainElement(And(HaveField("Name", c),
						HaveField("LastSyncTime.Time", BeTemporally(">", t.Truncate(time.Second))))), "Replicator %s in %s", rep.Name, c)
				}
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	}
	start := time.Now()
	Eventually(func(g Gomega) {
		g.Expect(runningProxies(ctx, g, ns, "app=load", "")).To(Equal(replicas))
		for _, c := range bed.Secondaries {
			g.Expect(podsInPhase(delegatesIn(ctx, c, ns), corev1.PodRunning)).To(BeNumerically(">", 0), "delegates running in %s", c.Name)
		}
	}).WithContext(ctx).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(Succeed())
	AddReportEntry(fmt.Sprintf("%d elected pods Running under Flotilla %s", replicas, prev.Version), time.Since(start).Round(time.Second).String())
	syncedSince(time.Now().Add(-time.Hour))
	before := delegateStarts(ctx, ns, "load")
	Expect(before).To(HaveLen(replicas))
	proxies, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=load"})
	Expect(err).NotTo(HaveOccurred())
	want := map[string]bool{}
	for _, p := range proxies.Items {
		want[string(p.UID)] = true
	}
	Expect(want).To(HaveLen(replicas))

	By("helm upgrade to this code while a sampler reads every proxy each 200 ms and a client creates 2 elected pods a second")
	oldLeader := leaderPod(ctx)
	Expect(oldLeader).NotTo(BeEmpty())
	previousIPs, previousPods := map[string]bool{}, map[string]bool{}
	for _, p := range managerPods(ctx) {
		previousIPs[p.Status.PodIP] = true
		previousPods[p.Name] = true
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	stops := watchStops(watchCtx, previousPods)
	upgrade := underLoad(ctx, ns, want, "created", func() {
		upgradeToCurrent(ctx)
		// The new replicas lead, and the load goes on a little under them.
		Eventually(func(g Gomega) {
			leader := leaderPod(ctx)
			g.Expect(leader).NotTo(Or(BeEmpty(), Equal(oldLeader)))
			pods := managerPods(ctx)
			g.Expect(pods).To(HaveLen(2))
			for _, p := range pods {
				g.Expect(p.Spec.Containers[0].Image).To(Equal(managerImageRepo + ":" + managerImageTag))
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	})
	AddReportEntry("helm upgrade --wait from "+prev.Version, upgrade.took.Round(100*time.Millisecond).String())
	// The previous release stops serving the moment its pod is told to stop, while the API server
	// may still call it for a moment: such a refusal is that release's, reported; any other fails.
	stopWatching()
	windows := stops()
	var byPrevious, others []string
	for _, r := range upgrade.refused {
		if ip := dialedIP(r); strings.Contains(r, "connection refused") && previousIPs[ip] {
			byPrevious = append(byPrevious, r)
		} else if timedOutWhileStopping(r, windows) {
			// A call the API server sent to a replica of that release as its pod went: its
			// network gone, the dial hangs to the webhook's timeout rather than being refused.
			byPrevious = append(byPrevious, r)
		} else {
			others = append(others, r)
		}
	}
	AddReportEntry("over the upgrade", fmt.Sprintf("%d samples of %d proxies, %d elected pods created, %d refused by a stopping replica of %s",
		upgrade.samples, replicas, upgrade.created, len(byPrevious), prev.Version))
	upgrade.expectHeld(ctx, ns, before, others, replicas)

	By("no Replicator of this code wrote an unchanged object again")
	// From the moment a manager of this code leads. Before it, in a rollout, the previous release's
	// standby replica may lead for a moment once the old leader is gone, and that release (which
	// trusted only what it had applied itself) re-applies each object once: reported, not judged.
	var lease coordinationv1.Lease
	Expect(cl.Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: flotillav1.ManagerLeaseName}, &lease)).To(Succeed())
	Expect(lease.Spec.AcquireTime).NotTo(BeNil())
	newLeader := lease.Spec.AcquireTime.Time
	syncedSince(newLeader)
	var writtenByPrevious []string
	for _, rep := range reps {
		for _, c := range []*testbed.Cluster{s1, s2} {
			writtenByPrevious = append(writtenByPrevious, flotillaWrites(c, rep.Spec.ReplicationNamespace, upgrade.start, newLeader)...)
			Expect(flotillaWrites(c, rep.Spec.ReplicationNamespace, newLeader, time.Now())).To(BeEmpty(),
				"writes of Replicator %s in %s since this code leads", rep.Name, c.Name)
		}
	}
	AddReportEntry(fmt.Sprintf("replicated objects written during the rollout, before this code led (by Flotilla %s)", prev.Version), fmt.Sprint(len(writtenByPrevious)))

	By("a rollout of this code under the same load: its replicas serve until the API server has stopped calling them")
	rollout := underLoad(ctx, ns, want, "rolled", func() {
		out, err := helm(ctx, bed.Primary, append([]string{"upgrade", "flotilla", "charts/flotilla", "-n", flotillav1.SystemNamespace,
			"--wait", "--timeout", "2m"}, inClusterValues("--set-string", fmt.Sprintf("manager.podAnnotations.e2e\\.flotilla\\.dev/rollout=r%d", time.Now().Unix()))...)...)
		Expect(err).NotTo(HaveOccurred(), "helm upgrade (a rollout): %s", out)
	})
	AddReportEntry("a rollout of this code", fmt.Sprintf("%s; %d samples, %d elected pods created", rollout.took.Round(100*time.Millisecond),
		rollout.samples, rollout.created))
	rollout.expectHeld(ctx, ns, before, rollout.refused, replicas)
	syncedSince(rollout.start.Add(rollout.took))
	for _, rep := range reps {
		for _, c := range []*testbed.Cluster{s1, s2} {
			Expect(flotillaWrites(c, rep.Spec.ReplicationNamespace, rollout.start, time.Now())).To(BeEmpty(),
				"writes of Replicator %s in %s over the rollout of this code", rep.Name, c.Name)
		}
	}

	// What was created through the rollouts runs, placed by either manager.
	Eventually(func(g Gomega) int { return runningProxies(ctx, g, ns, "app in (created,rolled)", "") }).
		WithContext(ctx).WithTimeout(90 * time.Second).Should(Equal(upgrade.created + rollout.created))

}

// loadRun is what a sampler and a creator saw over one operation.
type loadRun struct {
	start      time.Time
	took       time.Duration
	violations []string
	samples    int
	created    int
	refused    []string
}

// underLoad runs op while a sampler reads the proxies of want every 200 ms and a client creates 2
// elected pods a second (labelled app=<app>), from 2 s before op to 5 s after it.
func underLoad(ctx SpecContext, ns string, want map[string]bool, app string, op func()) loadRun {
	loadCtx, stopLoad := context.WithCancel(ctx)
	var sampler proxySampler
	creator := podCreator{prefix: app}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer GinkgoRecover()
		defer wg.Done()
		sampler.run(loadCtx, ns, "app=load", want, 200*time.Millisecond)
	}()
	go func() {
		defer GinkgoRecover()
		defer wg.Done()
		creator.run(loadCtx, ns, map[string]string{"app": app}, 500*time.Millisecond)
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopLoad()
			wg.Wait()
		}
	}
	DeferCleanup(stop)
	time.Sleep(2 * time.Second) // the load runs before the operation too
	r := loadRun{start: time.Now()}
	op()
	r.took = time.Since(r.start)
	time.Sleep(5 * time.Second)
	stop()
	r.violations, r.samples = sampler.result()
	r.created, r.refused = creator.result()
	return r
}

// expectHeld checks a run: no creation refused (of refused, those that count), the creator and
// the sampler kept their pace, no proxy left Running and Ready, no delegate restarted.
func (r loadRun) expectHeld(ctx SpecContext, ns string, before map[string]string, refused []string, replicas int) {
	GinkgoHelper()
	Expect(refused).To(BeEmpty(), "elected pod creations refused (%d made)", r.created)
	Expect(r.created).To(BeNumerically(">=", int(2*r.took.Seconds())), "the client kept creating 2 pods a second")
	Expect(r.violations).To(BeEmpty(), "a proxy's status left Running and Ready (of %d samples of %d)", r.samples, replicas)
	Expect(r.samples).To(BeNumerically(">=", int(r.took/(400*time.Millisecond))), "the sampler kept its pace")
	Expect(delegateStarts(ctx, ns, "load")).To(Equal(before), "a delegate restarted or was replaced")
}

// stopWindow is when a manager pod was told to stop (first seen going) and when it was gone.
type stopWindow struct{ from, to time.Time }

// watchStops polls the manager pods named until ctx ends; the function it returns waits for
// that and gives each named pod's stop window (to is the end of the watch for one still there).
func watchStops(ctx context.Context, names map[string]bool) func() []stopWindow {
	windows := map[string]*stopWindow{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			pods, err := bed.Primary.Clientset.CoreV1().Pods(flotillav1.SystemNamespace).List(ctx, metav1.ListOptions{
				LabelSelector: managerPodSelector})
			now := time.Now()
			if err == nil {
				there := map[string]bool{}
				for _, p := range pods.Items {
					there[p.Name] = true
					if names[p.Name] && p.DeletionTimestamp != nil && windows[p.Name] == nil {
						windows[p.Name] = &stopWindow{from: now}
					}
				}
				for name := range names {
					if there[name] {
						continue
					}
					if windows[name] == nil {
						windows[name] = &stopWindow{from: now}
					}
					if windows[name].to.IsZero() {
						windows[name].to = now
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() []stopWindow {
		<-done
		var out []stopWindow
		for _, w := range windows {
			if w.to.IsZero() {
				w.to = time.Now()
			}
			out = append(out, *w)
		}
		return out
	}
}

// timedOutWhileStopping is whether a refusal (stamped time.StampMilli, as podCreator keeps them)
// is a webhook call that timed out from a pod's stop until a while after it was gone: the API
// server's view of the webhook's endpoints follows a pod's going by a moment, and a call
// dialled then waits out the webhook's 5 s timeout.
func timedOutWhileStopping(refusal string, windows []stopWindow) bool {
	if !strings.Contains(refusal, "context deadline exceeded") {
		return false
	}
	stamp, _, ok := strings.Cut(refusal, ": ")
	if !ok {
		return false
	}
	at, err := time.ParseInLocation(time.StampMilli, stamp, time.Local)
	if err != nil {
		return false
	}
	now := time.Now()
	at = at.AddDate(now.Year(), 0, 0)
	for _, w := range windows {
		if !at.Before(w.from) && at.Before(w.to.Add(15*time.Second)) {
			return true
		}
	}
	return false
}

// dialedIP is the address a refusal's "dial tcp IP:PORT" names ("" when none).
func dialedIP(refusal string) string {
	_, rest, ok := strings.Cut(refusal, "dial tcp ")
	if !ok {
		return ""
	}
	host, _, _ := strings.Cut(rest, ":")
	return host
}
