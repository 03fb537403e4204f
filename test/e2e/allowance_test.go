package e2e

import (
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/pkg/access"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// A secondary lends part of itself: its admin states, per primary, the most that primary may use
// there (join --allow, then the PrimaryAllowance); its lender (flotilla-manager lender, started
// here against secondary1 as the chart runs it there) holds the primary to it with quotas its own
// API server enforces.
var _ = Describe("a secondary that lends part of itself", Ordered, Serial, Label("disruptive"), func() {
	const ns, secondNS = "lent", "second-primary"
	var (
		s1        *testbed.Cluster
		admin     client.Client
		id        string
		allowance = func(ctx SpecContext, g Gomega, name string) *flotillav1.PrimaryAllowance {
			var a flotillav1.PrimaryAllowance
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: name}, &a)).To(Succeed())
			return &a
		}
		// as is a clientset acting as a primary's joined identity in secondary1.
		as = func(names access.Names) kubernetes.Interface {
			cfg := rest.CopyConfig(s1.RESTConfig)
			cfg.Impersonate = rest.ImpersonationConfig{UserName: names.Username(),
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + flotillav1.SystemNamespace, "system:authenticated"}}
			cs, err := kubernetes.NewForConfig(cfg)
			Expect(err).NotTo(HaveOccurred())
			return cs
		}
		handMade = func(name string, primary string) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{flotillav1.LabelPrimary: primary}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
		}
		setPods = func(ctx SpecContext, name string, pods int64) {
			Eventually(func(g Gomega) {
				a := allowance(ctx, g, name)
				a.Spec.Hard[corev1.ResourcePods] = *resource.NewQuantity(pods, resource.DecimalSI)
				g.Expect(admin.Update(ctx, a)).To(Succeed())
			}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		}
		usedPods = func(a *flotillav1.PrimaryAllowance) int64 {
			q := a.Status.Used[corev1.ResourcePods]
			return q.Value()
		}
	)

	BeforeAll(func(ctx SpecContext) {
		joinBothSecondaries(ctx)
		s1, admin, id = bed.Secondaries[0], clientOf(bed.Secondaries[0]), primaryID(ctx)
		lender, err := testbed.StartProcess("flotilla-lender", managerBin, []string{"lender", "--kubeconfig", s1.KubeconfigPath,
			"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0", "--log-level=debug"},
			filepath.Join(workDir, "lender.log"))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(lender.Stop(10 * time.Second)).To(Succeed()) })
		// Cleanup runs before the lender stops: deleting an allowance is the lender's to finish.
		DeferCleanup(func(ctx SpecContext) {
			_ = bed.Primary.Clientset.AppsV1().Deployments(ns).Delete(ctx, "lent", metav1.DeleteOptions{})
			_ = admin.Delete(ctx, &flotillav1.PrimaryAllowance{ObjectMeta: metav1.ObjectMeta{Name: id}})
			Eventually(func(g Gomega) {
				var quotas corev1.ResourceQuotaList
				g.Expect(admin.List(ctx, &quotas, client.HasLabels{flotillav1.LabelAllowance})).To(Succeed())
				g.Expect(quotas.Items).To(BeEmpty(), "the lender removes its quotas when an allowance goes")
				var nss corev1.NamespaceList
				g.Expect(admin.List(ctx, &nss, client.HasLabels{flotillav1.LabelAllowance})).To(Succeed())
				g.Expect(nss.Items).To(BeEmpty(), "and its label from the namespaces")
				err := admin.Get(ctx, client.ObjectKey{Name: id}, &flotillav1.PrimaryAllowance{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "and its finalizer: %v", err)
			}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		})
		enabledNamespace(ctx, ns)
	})

	It("shows its cap as the virtual node's allocatable, keeps pods beyond it waiting, refuses a delegate made by hand beyond it, lets the admin raise it, and gives a second primary its own", func(ctx SpecContext) {
		By("join --allow writes the allowance; the lender puts a quota in force in every namespace the primary manages")
		out, err := flotillactl(ctx, "cluster", "join", "--secondary-context", s1.Name, "--token-duration", "10m", "--allow", "pods=1000")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("lends this primary at most pods=1k"))
		// What the primary uses there must hold still: an earlier spec's pods may still be going
		// (a 200-pod rollout's), and a cap of "what it uses + 3" measured then lends more later.
		// Held still: nothing terminating in its namespaces, here or in the primary, and the quotas
		// count what runs.
		var used int64
		Eventually(func(g Gomega) {
			a := allowance(ctx, g, id)
			c := meta.FindStatusCondition(a.Status.Conditions, flotillav1.ConditionEnforced)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			var nss corev1.NamespaceList
			g.Expect(admin.List(ctx, &nss, client.MatchingLabels{flotillav1.LabelManagedBy: id})).To(Succeed())
			var live int64
			for _, n := range nss.Items {
				pods, err := s1.Clientset.CoreV1().Pods(n.Name).List(ctx, metav1.ListOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				if len(pods.Items) > 0 {
					g.Expect(n.DeletionTimestamp).To(BeNil(), "namespace %s is going in %s", n.Name, s1.Name)
					// A namespace an earlier spec deleted in the primary, whose pods the namespace
					// controller has not reached yet: none is going so far, all will. (One gone
					// from the primary may still hold pods of others here, which stay.)
					primaryNS, err := bed.Primary.Clientset.CoreV1().Namespaces().Get(ctx, n.Name, metav1.GetOptions{})
					if !apierrors.IsNotFound(err) {
						g.Expect(err).NotTo(HaveOccurred())
						g.Expect(primaryNS.DeletionTimestamp).To(BeNil(), "namespace %s is going in the primary", n.Name)
					}
				}
				// A delegate whose proxy is gone or going goes too, a moment later.
				proxies, err := bed.Primary.Clientset.CoreV1().Pods(n.Name).List(ctx, metav1.ListOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				staying := map[string]bool{}
				for _, p := range proxies.Items {
					staying[p.Name] = p.DeletionTimestamp == nil
				}
				for _, p := range pods.Items {
					g.Expect(p.DeletionTimestamp).To(BeNil(), "pod %s/%s is still going", p.Namespace, p.Name)
					if p.Annotations[flotillav1.AnnotationProxyUID] != "" {
						g.Expect(staying[p.Name]).To(BeTrue(), "the proxy of %s/%s is gone or going", p.Namespace, p.Name)
					}
					if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
						live++
					}
				}
			}
			g.Expect(usedPods(a)).To(Equal(live), "the quotas count what runs")
			used = live
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		GinkgoWriter.Printf("pods the primary uses in %s: %d\n", s1.Name, used)

		By("the admin lends 3 pods more than it uses: the virtual node's allocatable says so")
		setPods(ctx, id, used+3)
		node := flotillav1.VirtualNodeName(s1.Name)
		Eventually(func(g Gomega) {
			n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Status.Allocatable.Pods().Value()).To(Equal(used + 3))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("an elected Deployment of 5 in that secondary: 3 delegates, 2 pods waiting")
		sel := map[string]string{"app": "lent"}
		_, err = bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "lent"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](5), Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s1.Name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// waiting is why each pod not Running waits: the webhook's, the proxy's or the scheduler's.
		waiting := func(g Gomega) []string {
			pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=lent"})
			g.Expect(err).NotTo(HaveOccurred())
			var why []string
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning {
					continue
				}
				reason := p.Annotations[flotillav1.AnnotationNoClusterFits] + " " + p.Status.Reason + " " + p.Status.Message
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
						reason += " " + c.Message
					}
				}
				why = append(why, reason)
			}
			return why
		}
		Eventually(func(g Gomega) {
			g.Expect(delegatesIn(ctx, s1, ns)).To(HaveLen(3))
			g.Expect(runningProxies(ctx, g, ns, "app=lent", node)).To(Equal(3))
			g.Expect(waiting(g)).To(HaveLen(2))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(delegatesIn(ctx, s1, ns)).To(HaveLen(3))
		}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(time.Second).Should(Succeed())
		for _, why := range waiting(Default) {
			// Admission found no room left in what the secondary lends (the pod waits gated), or
			// the secondary's quota refused a delegate admitted before its count caught up.
			Expect(why).To(Or(ContainSubstring("lends this primary no more room"), ContainSubstring(flotillav1.ReasonAllowanceExceeded),
				ContainSubstring("Insufficient pods")))
		}
		GinkgoWriter.Printf("waiting: %v\n", waiting(Default))

		By("a delegate made by hand with the joined identity beyond the cap: the secondary's API server refuses it")
		names := access.NamesFor(id)
		_, err = as(names).CoreV1().Pods(ns).Create(ctx, handMade("by-hand", id), metav1.CreateOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("exceeded quota: " + flotillav1.AllowanceQuotaName))

		By("the admin lends 2 more by editing the allowance: the waiting pods start")
		setPods(ctx, id, used+5)
		Eventually(func(g Gomega) {
			g.Expect(delegatesIn(ctx, s1, ns)).To(HaveLen(5))
			g.Expect(runningProxies(ctx, g, ns, "app=lent", node)).To(Equal(5))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(allowance(ctx, g, id).Status.Summary).To(Equal(fmt.Sprintf("pods %d/%d", used+5, used+5)))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("a second primary joined to the same secondary gets its own cap: 2 pods, whatever the first uses")
		second := access.NamesFor("e2e-second-primary")
		for _, o := range access.Objects(second, "shared", access.Limits{Allowance: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}}) {
			err := admin.Create(ctx, o)
			if apierrors.IsAlreadyExists(err) {
				continue // flotilla-system: the first primary's too, never deleted here
			}
			Expect(err).NotTo(HaveOccurred(), "%T %s", o, o.GetName())
			DeferCleanup(func(ctx SpecContext) { _ = admin.Delete(ctx, o) })
		}
		asSecond := as(second)
		Eventually(func() error {
			_, err := asSecond.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secondNS,
				Labels: map[string]string{flotillav1.LabelManagedBy: second.PrimaryID, flotillav1.LabelPrimary: second.PrimaryID}}}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			_ = admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secondNS}})
		})
		Eventually(func(g Gomega) {
			var n corev1.Namespace
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: secondNS}, &n)).To(Succeed())
			g.Expect(n.Labels).To(HaveKeyWithValue(flotillav1.LabelAllowance, second.PrimaryID), "the lender put its quota in force")
			_, err := s1.Clientset.CoreV1().ServiceAccounts(secondNS).Get(ctx, "default", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		for i := range 2 {
			Eventually(func() error {
				_, err := asSecond.CoreV1().Pods(secondNS).Create(ctx, handMade("second-"+strconv.Itoa(i), second.PrimaryID), metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					return nil
				}
				return err
			}).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(), "pod %d of 2", i)
		}
		_, err = asSecond.CoreV1().Pods(secondNS).Create(ctx, handMade("second-2", second.PrimaryID), metav1.CreateOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("exceeded quota: " + flotillav1.AllowanceQuotaName))
		Eventually(func(g Gomega) {
			g.Expect(allowance(ctx, g, second.PrimaryID).Status.Summary).To(Equal("pods 2/2"))
			g.Expect(allowance(ctx, g, id).Status.Summary).To(Equal(fmt.Sprintf("pods %d/%d", used+5, used+5)), "the first primary's is its own")
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
	})
})
