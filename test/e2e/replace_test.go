package e2e

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// `flotillactl cluster replace OLD --with NEW`, the out-of-place upgrade: the Replicators'
// objects healthy in NEW before any elected pod moves, then every elected pod out of OLD, then
// OLD gone from the Replicators and the fleet; SIGKILLed after the replication step and run again,
// it resumes. On this bed NEW is secondary2, which the Replicator did not target before.
var _ = Describe("cluster replace", Ordered, Serial, Label("disruptive"), func() {
	const ns = "replace"

	BeforeAll(func(ctx SpecContext) { movingNamespace(ctx, ns) }, NodeTimeout(2*time.Minute))

	It("replicates into the new cluster and waits until it is healthy there, drains the old one, detaches and removes it; interrupted, it resumes; nothing is lost", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		// Elected pods in secondary1 only: secondary2 cordoned while they are created.
		setUnschedulable(ctx, s2.Name, true)
		Eventually(func(g Gomega) { expectNotPlaceableIn(g, ctx, s2.Name) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		four := int32(4)
		sel := map[string]string{"app": "moved"}
		_, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "moved"},
			Spec: appsv1.DeploymentSpec{Replicas: &four, Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			g.Expect(readyProxiesOn(ctx, g, ns, "app=moved", s1.Name)).To(Equal(4))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
		setUnschedulable(ctx, s2.Name, false)

		// A Replicator of secondary1 only (plumber's sample, in a namespace of its own).
		rep := plumberSample(s1.Name)
		rep.Name, rep.Spec.ReplicationNamespace = "replaced", "replace-objects"
		Expect(clientOf(bed.Primary).Create(ctx, rep)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			_ = clientOf(bed.Primary).Delete(ctx, &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: "replaced"}})
		})
		Eventually(func(g Gomega) {
			st, err := replicatorStatus(ctx, "replaced")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Status.Synced).To(Equal("synced"), "%+v", st.Status.Clusters)
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

		// The first run, SIGKILLed as soon as it says it drains: the objects must be healthy in
		// secondary2 by then, and no elected pod moved yet.
		cmd := exec.CommandContext(ctx, cliBin, "--kubeconfig", bed.KubeconfigPath, "--context", testbed.PrimaryName,
			"cluster", "replace", s1.Name, "--with", s2.Name, "--timeout", "5m")
		stdout, err := cmd.StdoutPipe()
		Expect(err).NotTo(HaveOccurred())
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		Expect(cmd.Start()).To(Succeed())
		var first strings.Builder
		var mu sync.Mutex
		draining := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			sc := bufio.NewScanner(stdout)
			once := sync.Once{}
			for sc.Scan() {
				mu.Lock()
				first.WriteString(sc.Text() + "\n")
				mu.Unlock()
				if strings.HasPrefix(sc.Text(), "[Draining]") {
					once.Do(func() { close(draining) })
				}
			}
		}()
		Eventually(draining).WithContext(ctx).WithTimeout(3*time.Minute).Should(BeClosed(), func() string { mu.Lock(); defer mu.Unlock(); return first.String() + stderr.String() })
		Expect(cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
		_ = cmd.Wait()
		mu.Lock()
		GinkgoWriter.Println(first.String())
		Expect(first.String()).To(ContainSubstring("Replicator(s) healthy in " + s2.Name))
		mu.Unlock()
		var d appsv1.Deployment
		Expect(clientOf(s2).Get(ctx, client.ObjectKey{Namespace: "replace-objects", Name: "nginx"}, &d)).To(Succeed(), "the Replicator's Deployment in the new cluster before any pod moves")
		Expect(d.Status.ReadyReplicas).To(Equal(*d.Spec.Replicas))
		var cd flotillav1.ClusterDetector
		Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: s1.Name}, &cd)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: s1.Name}, &cd)).To(Succeed())
			c := meta.FindStatusCondition(cd.Status.Conditions, flotillav1.ConditionReplacement)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal("Draining"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		// Run again: it resumes at the drain, and finishes.
		start := time.Now()
		out, err := flotillactl(ctx, "cluster", "replace", s1.Name, "--with", s2.Name, "--timeout", "3m")
		Expect(err).NotTo(HaveOccurred(), out)
		AddReportEntry("cluster replace, resumed at the drain", time.Since(start).Round(time.Second).String())
		GinkgoWriter.Println(out)
		Expect(out).To(ContainSubstring("Resuming the replacement of " + s1.Name + " by " + s2.Name + " at step Draining"))
		Expect(out).To(ContainSubstring("Replaced " + s1.Name + " by " + s2.Name))

		// Everything of the user's is there: the 4 pods in secondary2, the Replicator's objects
		// there, the Replicator targeting it alone, secondary1 gone from the fleet.
		Eventually(func(g Gomega) {
			g.Expect(readyProxiesOn(ctx, g, ns, "app=moved", s2.Name)).To(Equal(4))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		st, err := replicatorStatus(ctx, "replaced")
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Spec.TargetCluster).To(Equal([]string{s2.Name}))
		Expect(clientOf(s2).Get(ctx, client.ObjectKey{Namespace: "replace-objects", Name: "nginx"}, &appsv1.Deployment{})).To(Succeed())
		err = clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: s1.Name}, &flotillav1.ClusterDetector{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "secondary1's ClusterDetector: %v", err)

		// Back for the specs that follow, at the address it had.
		out, err = flotillactl(ctx, "cluster", "join", "--secondary-context", s1.Name, "--token-duration", "10m", "--server", serverAtHostIP(s1))
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func(g Gomega) { expectRunningAndReady(g, ctx, s1.Name) }).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	}, SpecTimeout(10*time.Minute))
})
