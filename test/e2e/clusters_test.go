package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/pkg/access"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/virtualnode"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// expectRunningAndReady checks that a secondary's ClusterDetector is Running and its node Ready.
func expectRunningAndReady(g Gomega, ctx SpecContext, name string) {
	cd, err := detector(ctx, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cd.Status.ClusterStatus).To(Equal(flotillav1.ClusterRunning), "ClusterDetector %s: %s", name, cd.Status.Message)
	g.Expect(nodeReady(ctx, flotillav1.VirtualNodeName(name))).To(Equal(corev1.ConditionTrue), "node of %s", name)
}

func expectUnknownAndNotReady(g Gomega, ctx SpecContext, name string) {
	cd, err := detector(ctx, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cd.Status.ClusterStatus).To(Equal(flotillav1.ClusterUnknown))
	g.Expect(cd.Status.Reason).NotTo(BeEmpty())
	g.Expect(nodeReady(ctx, flotillav1.VirtualNodeName(name))).To(Equal(corev1.ConditionFalse))
}

var _ = Describe("secondaries as virtual nodes", Ordered, Serial, Label("disruptive"), func() {
	var s1, s2 *testbed.Cluster
	BeforeAll(func() { s1, s2 = bed.Secondaries[0], bed.Secondaries[1] })

	It("joins two secondaries (one at a --server URL other than its kubeconfig's): two virtual nodes Ready and three ClusterDetectors Running within 15 s", func(ctx SpecContext) {
		// s2 is registered at the host's own address, as for a manager in a pod that cannot
		// reach the kubeconfig's 127.0.0.1; a --server that is another cluster is refused.
		s2Server := serverAtHostIP(s2)
		out, err := flotillactl(ctx, "cluster", "join", "--secondary-context", s2.Name, "--server", serverAtHostIP(s1))
		Expect(err).To(HaveOccurred(), out)
		Expect(out).To(Or(ContainSubstring("answers as another cluster"), ContainSubstring("does not present a certificate context "+s2.Name+" trusts")))
		start := time.Now()
		for _, c := range []*testbed.Cluster{s1, s2} {
			args := []string{"cluster", "join", "--secondary-context", c.Name, "--token-duration", "10m"}
			if c == s2 {
				args = append(args, "--server", s2Server)
			}
			out, err := flotillactl(ctx, args...)
			Expect(err).NotTo(HaveOccurred(), out)
			Expect(out).To(ContainSubstring("Joined context " + c.Name))
			Expect(out).NotTo(ContainSubstring("eyJ"), "a token was printed")
		}
		Expect(registeredServer(ctx, s2.Name)).To(Equal(s2Server))
		Expect(registeredServer(ctx, s1.Name)).To(Equal(s1.RESTConfig.Host))
		Eventually(func(g Gomega) {
			for _, c := range []*testbed.Cluster{s1, s2} {
				expectRunningAndReady(g, ctx, c.Name)
			}
			cd, err := detector(ctx, "primary")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cd.Status.ClusterStatus).To(Equal(flotillav1.ClusterRunning))
			g.Expect(cd.Labels[flotillav1.LabelRole]).To(Equal(flotillav1.RolePrimary))
		}).WithContext(ctx).WithTimeout(15 * time.Second).Should(Succeed())
		AddReportEntry("join to Ready", time.Since(start).Round(100*time.Millisecond).String())

		n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, flotillav1.VirtualNodeName(s1.Name), metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(n.Labels).To(HaveKeyWithValue("type", "virtual-kubelet"))
		Expect(n.Labels).To(HaveKeyWithValue(flotillav1.LabelCluster, s1.Name))
		Expect(n.Labels).To(HaveKeyWithValue(flotillav1.LabelRegion, testbed.Region(s1.Name)))
		Expect(n.Labels).To(HaveKeyWithValue(flotillav1.LabelOS, "linux"))
		Expect(n.Labels).To(HaveKey("node-role.kubernetes.io/cluster"))
		Expect(n.Labels).NotTo(HaveKey(corev1.LabelOSStable))
		Expect(n.Labels).NotTo(HaveKey(corev1.LabelArchStable))
		Expect(n.Spec.Taints).To(ContainElement(corev1.Taint{Key: flotillav1.TaintVirtualNode, Value: flotillav1.TaintVirtualNodeValue, Effect: corev1.TaintEffectNoSchedule}))
		// The secondary's version, capped at the primary's minor (a kubelet newer than its API
		// server is refused by tools that compare them).
		Expect(n.Status.NodeInfo.KubeletVersion).To(Equal(virtualnode.CapVersion(serverVersion(s1), serverVersion(bed.Primary))))

		var fp flotillav1.FlotillaPrimary
		Expect(clientOf(s1).Get(ctx, client.ObjectKey{Name: primaryID(ctx)}, &fp)).To(Succeed())
		Expect(fp.Spec.ClusterName).To(Equal(s1.Name))

		out, err = flotillactl(ctx, "cluster", "list")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`secondary1\s+secondary1\s+flotilla-\w+@secondary1\s+secondary1\s+secondary\s+Running`))
		Expect(out).NotTo(ContainSubstring("eyJ"))
	}, SpecTimeout(2*time.Minute))

	It("renews the joined identity's token in place and shows its expiry", func(ctx SpecContext) {
		cd, err := detector(ctx, s1.Name)
		Expect(err).NotTo(HaveOccurred())
		Expect(cd.Status.TokenExpirationTime).NotTo(BeNil())
		first := cd.Status.TokenExpirationTime.Time
		Expect(first).To(BeTemporally("~", time.Now().Add(10*time.Minute), 2*time.Minute))
		Eventually(func(g Gomega) {
			cd, err := detector(ctx, s1.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cd.Status.TokenExpirationTime).NotTo(BeNil())
			g.Expect(cd.Status.TokenExpirationTime.Time).To(BeTemporally(">", first))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		expectRunningAndReady(Default, ctx, s1.Name)
	}, SpecTimeout(90*time.Second))

	It("restores a label and the taint someone removed from a virtual node", func(ctx SpecContext) {
		name := flotillav1.VirtualNodeName(s1.Name)
		patch := []byte(`{"metadata":{"labels":{"` + flotillav1.LabelCluster + `":null}},"spec":{"taints":[]}}`)
		_, err := bed.Primary.Clientset.CoreV1().Nodes().Patch(ctx, name, "application/merge-patch+json", patch, metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Labels).To(HaveKeyWithValue(flotillav1.LabelCluster, s1.Name))
			g.Expect(n.Spec.Taints).To(ContainElement(HaveField("Key", flotillav1.TaintVirtualNode)))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	}, SpecTimeout(time.Minute))

	It("shows the primary's own context as the role=primary ClusterDetector, with no virtual node", func(ctx SpecContext) {
		out, err := flotillactl(ctx, "cluster", "add", "--secondary-context", testbed.PrimaryName, "--name", "self")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func(g Gomega) {
			cd, err := detector(ctx, "primary")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cd.Spec.Context).To(Equal("self"))
			g.Expect(cd.Status.ClusterID).To(Equal(primaryID(ctx)))
		}).WithContext(ctx).WithTimeout(15 * time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			_, err := detector(ctx, "self")
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no ClusterDetector of its own")
			_, err = bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, flotillav1.VirtualNodeName("self"), metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no virtual node")
		}).WithContext(ctx).WithTimeout(5 * time.Second).Should(Succeed())
	}, SpecTimeout(time.Minute))

	It("gives capacity as the sum of the secondary's nodes, and less allocatable when a plain pod runs there", func(ctx SpecContext) {
		name := flotillav1.VirtualNodeName(s2.Name)
		wantCPU := resource.MustParse(fmt.Sprintf("%d", 32*len(s2.Nodes)))
		wantMem := resource.MustParse(fmt.Sprintf("%dGi", 256*len(s2.Nodes)))
		Eventually(func(g Gomega) {
			n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Status.Capacity.Cpu().Cmp(wantCPU)).To(Equal(0), "capacity cpu %s", n.Status.Capacity.Cpu())
			g.Expect(n.Status.Capacity.Memory().Cmp(wantMem)).To(Equal(0), "capacity memory %s", n.Status.Capacity.Memory())
			g.Expect(n.Status.Allocatable.Cpu().Cmp(wantCPU)).To(Equal(0))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		ns := "capacity-check"
		_, err := s2.Clientset.CoreV1().Namespaces().Create(ctx, testNamespace(ns), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = s2.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "hog"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "hog", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}}}}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		want := wantCPU.DeepCopy()
		want.Sub(resource.MustParse("6"))
		Eventually(func(g Gomega) {
			n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Status.Allocatable.Cpu().Cmp(want)).To(Equal(0), "allocatable cpu %s", n.Status.Allocatable.Cpu())
			g.Expect(n.Status.Capacity.Cpu().Cmp(wantCPU)).To(Equal(0))
		}).WithContext(ctx).WithTimeout(45 * time.Second).Should(Succeed())
		cd, err := detector(ctx, s2.Name)
		Expect(err).NotTo(HaveOccurred())
		// Every node counts in NodeCount; a real node, tainted, adds nothing to the capacity above.
		nodes := len(s2.Nodes)
		if s2.RealNode != nil {
			nodes++
		}
		Expect(cd.Status.NodeCount).To(BeEquivalentTo(nodes))
	}, SpecTimeout(2*time.Minute))

	It("confines the joined identity: no Secrets in kube-system, no RBAC, writes only in managed namespaces", func(ctx SpecContext) {
		names := access.NamesFor(primaryID(ctx))
		can := func(attrs authorizationv1.ResourceAttributes) bool {
			sar, err := s1.Clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: names.Username(),
					Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + flotillav1.SystemNamespace, "system:authenticated"},
					ResourceAttributes: &attrs},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			return sar.Status.Allowed
		}
		Expect(can(authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "get", Resource: "secrets"})).To(BeFalse())
		Expect(can(authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "list", Resource: "secrets"})).To(BeFalse())
		Expect(can(authorizationv1.ResourceAttributes{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"})).To(BeFalse())
		// The controls: what it needs, it has.
		Expect(can(authorizationv1.ResourceAttributes{Namespace: "any", Verb: "create", Resource: "pods"})).To(BeTrue())
		Expect(can(authorizationv1.ResourceAttributes{Verb: "list", Resource: "nodes"})).To(BeTrue())

		// As that identity: a pod in a namespace without the managed-by label is refused by the policy.
		asFlotilla := rest.CopyConfig(s1.RESTConfig)
		asFlotilla.Impersonate = rest.ImpersonationConfig{UserName: names.Username(),
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + flotillav1.SystemNamespace, "system:authenticated"}}
		cs, err := kubernetes.NewForConfig(asFlotilla)
		Expect(err).NotTo(HaveOccurred())
		for ns, labels := range map[string]map[string]string{
			"unmanaged": nil, "managed": {flotillav1.LabelManagedBy: names.PrimaryID},
		} {
			_, err := s1.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		// Gone before the next spec: a pod left in a namespace labelled for the primary counts in
		// what it uses there, which the allowance spec measures.
		DeferCleanup(func(ctx SpecContext) {
			for _, ns := range []string{"unmanaged", "managed"} {
				Expect(client.IgnoreNotFound(clientOf(s1).Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
			}
			Eventually(func(g Gomega) {
				for _, ns := range []string{"unmanaged", "managed"} {
					_, err := s1.Clientset.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
					g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "namespace %s in %s: %v", ns, s1.Name, err)
				}
			}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		})
		pod := func() *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		}
		Eventually(func() error {
			_, err := cs.CoreV1().Pods("unmanaged").Create(ctx, pod(), metav1.CreateOptions{})
			return err
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(MatchError(ContainSubstring(
			"may write only in namespaces labelled " + flotillav1.LabelManagedBy)))
		_, err = cs.CoreV1().Pods("managed").Create(ctx, pod(), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred(), "the same pod in a managed namespace is allowed")
		_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-sneaky",
			Labels: map[string]string{flotillav1.LabelManagedBy: names.PrimaryID}}}, metav1.CreateOptions{})
		Expect(err).To(MatchError(ContainSubstring("never in kube-*")))

		// It cannot take a namespace by labelling it, nor delete one it does not manage, nor exec
		// into a pod outside its namespaces (CONNECT requests).
		unmanaged, err := s1.Clientset.CoreV1().Namespaces().Get(ctx, "unmanaged", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		unmanaged.Labels = map[string]string{flotillav1.LabelManagedBy: names.PrimaryID}
		_, err = cs.CoreV1().Namespaces().Update(ctx, unmanaged, metav1.UpdateOptions{})
		Expect(err).To(MatchError(ContainSubstring("may write only in namespaces labelled")), "labelling an unmanaged namespace")
		Expect(cs.CoreV1().Namespaces().Delete(ctx, "unmanaged", metav1.DeleteOptions{})).To(
			MatchError(ContainSubstring("may write only in namespaces labelled")), "deleting an unmanaged namespace")
		err = cs.CoreV1().RESTClient().Post().Namespace(metav1.NamespaceSystem).Resource("pods").Name("any").
			SubResource("exec").Param("command", "true").Param("stdout", "true").Do(ctx).Error()
		Expect(err).To(MatchError(ContainSubstring("may write only in namespaces labelled")), "exec in kube-system")
	}, SpecTimeout(time.Minute))

	It("shows a bogus context Unknown with a reason while the others stay Running, and survives a garbage Secret", func(ctx SpecContext) {
		port, err := testbed.FreePort()
		Expect(err).NotTo(HaveOccurred())
		editRegistrationConfig(ctx, func(cfg *clientcmdapi.Config) {
			cfg.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: fmt.Sprintf("https://127.0.0.1:%d", port)}
			cfg.AuthInfos["nobody"] = &clientcmdapi.AuthInfo{Token: "not-a-real-token"}
			cfg.Contexts["bogus"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: "nobody"}
		})
		deadline := time.Now().Add(15 * time.Second)
		for {
			cd, err := detector(ctx, "bogus")
			if err == nil && cd.Status.ClusterStatus == flotillav1.ClusterUnknown && cd.Status.Reason == flotillav1.ReasonProbeFailed {
				Expect(cd.Status.Message).To(ContainSubstring("connection refused"))
				break
			}
			Expect(time.Now().Before(deadline)).To(BeTrue(), "bogus ClusterDetector not Unknown within 15 s")
			// The others stay Running and Ready the whole time.
			for _, c := range []*testbed.Cluster{s1, s2} {
				expectRunningAndReady(Default, ctx, c.Name)
			}
			time.Sleep(250 * time.Millisecond)
		}
		_, err = bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, flotillav1.VirtualNodeName("bogus"), metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a cluster that never answered gets no virtual node")

		var good []byte
		editRegistration(ctx, func(raw []byte) []byte { good = raw; return []byte("garbage: [") })
		Eventually(func(g Gomega) {
			cd, err := detector(ctx, "primary")
			g.Expect(err).NotTo(HaveOccurred())
			cond := meta.FindStatusCondition(cd.Status.Conditions, flotillav1.ConditionKubeconfigValid)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(cond.Reason).To(Equal(flotillav1.ReasonKubeconfigUnparsable))
		}).WithContext(ctx).WithTimeout(15 * time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			for _, c := range []*testbed.Cluster{s1, s2} {
				expectRunningAndReady(g, ctx, c.Name)
			}
			_, err := detector(ctx, "bogus")
			g.Expect(err).NotTo(HaveOccurred(), "the last good configuration stays in force")
		}).WithContext(ctx).WithTimeout(5 * time.Second).Should(Succeed())

		editRegistration(ctx, func([]byte) []byte { return good })
		editRegistrationConfig(ctx, func(cfg *clientcmdapi.Config) { delete(cfg.Contexts, "bogus") })

		// The same cluster registered a second time is refused, and the first registration is untouched.
		out, err := flotillactl(ctx, "cluster", "add", "--secondary-context", s1.Name, "--name", "again")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func(g Gomega) {
			cd, err := detector(ctx, "again")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cd.Status.Reason).To(Equal(flotillav1.ReasonDuplicateCluster))
			g.Expect(cd.Status.Message).To(ContainSubstring(s1.Name))
		}).WithContext(ctx).WithTimeout(15 * time.Second).Should(Succeed())
		_, err = bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, flotillav1.VirtualNodeName("again"), metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a duplicate gets no virtual node")
		expectRunningAndReady(Default, ctx, s1.Name)
		editRegistrationConfig(ctx, func(cfg *clientcmdapi.Config) { delete(cfg.Contexts, "again") })
		Eventually(func(g Gomega) {
			_, err := detector(ctx, "bogus")
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
			cd, err := detector(ctx, "primary")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(meta.IsStatusConditionTrue(cd.Status.Conditions, flotillav1.ConditionKubeconfigValid)).To(BeTrue())
		}).WithContext(ctx).WithTimeout(15 * time.Second).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("marks a hung secondary Unknown and its node not Ready within 30 s, and Ready again within 30 s", func(ctx SpecContext) {
		pid := manager.PID()
		Expect(bed.Freeze(s1)).To(Succeed())
		DeferCleanup(func() { _ = bed.Thaw(s1) })
		start := time.Now()
		Eventually(func(g Gomega) { expectUnknownAndNotReady(g, ctx, s1.Name) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		AddReportEntry("hung secondary to Ready=False", time.Since(start).Round(100*time.Millisecond).String())
		expectRunningAndReady(Default, ctx, s2.Name)

		Expect(bed.Thaw(s1)).To(Succeed())
		start = time.Now()
		Eventually(func(g Gomega) { expectRunningAndReady(g, ctx, s1.Name) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		AddReportEntry("thawed secondary to Ready", time.Since(start).Round(100*time.Millisecond).String())
		// Its controllers' informers may back off after the freeze: later specs need them working.
		Expect(testbed.WaitWorking(ctx, s1)).To(Succeed())
		Expect(manager.Exited()).To(BeFalse())
		Expect(manager.PID()).To(Equal(pid), "the manager was not restarted")
	}, SpecTimeout(2*time.Minute))

	// One secondary coming back once took the webhook away from every cluster: readiness waited
	// for its capacity to relist, and its informers were restarted on every replica.
	It("keeps admitting elected pods for one secondary while another holding 20,000 pods is frozen and thawed, and stays ready throughout", func(ctx SpecContext) {
		const space, steady = "big-secondary", "steady-election"
		n := bigSecondaryPods()
		_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: steady, Labels: map[string]string{flotillav1.LabelEnabled: "true"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = bed.Primary.Clientset.CoreV1().Namespaces().Delete(ctx, steady, metav1.DeleteOptions{})
		})
		prepareNamespace(ctx, s2, space)
		DeferCleanup(func(ctx SpecContext) {
			// Gone before the next spec: a manager started meanwhile would relist them all, and
			// its readiness waits for that secondary only until its deadline.
			// Fewer than n when the spec ran long: the secondary's pod garbage collector deletes
			// pods bound to a node that does not exist once they are 40 s old.
			deleted, err := bed.DeleteStoredPods(ctx, s2, space)
			Expect(err).NotTo(HaveOccurred())
			Expect(deleted).To(BeNumerically(">", 0))
			Eventually(func(g Gomega) {
				pods, err := s2.Clientset.CoreV1().Pods(space).List(ctx, metav1.ListOptions{Limit: 1})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(pods.Items).To(BeEmpty())
			}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(2 * time.Second).Should(Succeed())
			_ = s2.Clientset.CoreV1().Namespaces().Delete(ctx, space, metav1.DeleteOptions{})
		})
		// Bound to a node that does not exist: no scheduler or kwok work, but every one of them is
		// a pod the capacity watch lists. Written into the secondary's etcd: what is measured is
		// Flotilla with a secondary that holds them, not how fast its API server creates them.
		start := time.Now()
		Expect(bed.StorePods(ctx, s2, space, "no-such-node", n, bigPodName)).To(Succeed())
		Eventually(func(g Gomega) {
			pods, err := s2.Clientset.CoreV1().Pods(space).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(HaveLen(n), "pods the API server of %s serves", s2.Name)
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		AddReportEntry(fmt.Sprintf("%d pods created in %s", n, s2.Name), time.Since(start).Round(time.Second).String())

		var refused, unready, admitted atomic.Int64
		var lastRefusal atomic.Value
		probe := &http.Client{Timeout: 2 * time.Second}
		loopCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			for i := 0; loopCtx.Err() == nil; i++ {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: steady, Name: fmt.Sprintf("steady-%d", i),
					Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s1.Name}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
				if err := clientOf(bed.Primary).Create(loopCtx, pod, client.DryRunAll); err != nil && loopCtx.Err() == nil {
					refused.Add(1)
					lastRefusal.Store(err.Error())
				} else if err == nil {
					admitted.Add(1)
				}
				if code, err := httpStatus(probe, manager.probeURL+"/readyz"); (err != nil || code != http.StatusOK) && loopCtx.Err() == nil {
					unready.Add(1)
				}
				select {
				case <-loopCtx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}()
		DeferCleanup(func() { stop(); <-done })

		Expect(bed.Freeze(s2)).To(Succeed())
		DeferCleanup(func() { _ = bed.Thaw(s2) })
		Eventually(func(g Gomega) { expectUnknownAndNotReady(g, ctx, s2.Name) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(bed.Thaw(s2)).To(Succeed())
		thawed := time.Now()
		Eventually(func(g Gomega) { expectRunningAndReady(g, ctx, s2.Name) }).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		AddReportEntry("thawed secondary of "+fmt.Sprint(n)+" pods to Ready", time.Since(thawed).Round(100*time.Millisecond).String())
		// Long enough for a relist of every pod there to end.
		time.Sleep(15 * time.Second)
		stop()
		<-done
		AddReportEntry("elected pods admitted for "+s1.Name+" meanwhile", fmt.Sprint(admitted.Load()))
		Expect(refused.Load()).To(BeZero(), "elected pods for %s refused while %s came back; the last: %v", s1.Name, s2.Name, lastRefusal.Load())
		Expect(unready.Load()).To(BeZero(), "/readyz failed while %s came back", s2.Name)
		Expect(admitted.Load()).To(BeNumerically(">", 10))
		Expect(testbed.WaitWorking(ctx, s2)).To(Succeed())
	}, SpecTimeout(10*time.Minute))

	// A stopped secondary (connection refused): the suite's one outage of a secondary (outage_test.go).

	It("lets the nodes go Unknown while the manager is stopped (past the node grace period, then longer than the pods' 10 s failover), evicts no elected pod, and is Ready within 30 s of its restart", func(ctx SpecContext) {
		// Elected replicas with a short failover: a dead manager must not move them.
		const ns = "manager-down"
		_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{flotillav1.LabelEnabled: "true"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		for _, c := range []*testbed.Cluster{s1, s2} {
			prepareNamespace(ctx, c, ns)
		}
		two := int32(2)
		sel := map[string]string{"app": "steady"}
		_, err = bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "steady"},
			Spec: appsv1.DeploymentSpec{Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationFailoverSeconds: "10"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		uids := func(g Gomega) (proxies, delegates []string) {
			list, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			for _, p := range list.Items {
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "proxy %s", p.Name)
				g.Expect(p.DeletionTimestamp).To(BeNil(), "proxy %s", p.Name)
				proxies = append(proxies, string(p.UID))
			}
			for _, c := range []*testbed.Cluster{s1, s2} {
				there, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
				if apierrors.IsNotFound(err) {
					continue
				}
				g.Expect(err).NotTo(HaveOccurred())
				for _, d := range there.Items {
					delegates = append(delegates, string(d.UID))
				}
			}
			sort.Strings(proxies)
			sort.Strings(delegates)
			return proxies, delegates
		}
		var proxiesBefore, delegatesBefore []string
		Eventually(func(g Gomega) {
			proxiesBefore, delegatesBefore = uids(g)
			g.Expect(proxiesBefore).To(HaveLen(2))
			g.Expect(delegatesBefore).To(HaveLen(2))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

		Expect(manager.Stop(20 * time.Second)).To(Succeed())
		stopped := time.Now()
		Eventually(func(g Gomega) {
			for _, c := range []*testbed.Cluster{s1, s2} {
				g.Expect(nodeReady(ctx, flotillav1.VirtualNodeName(c.Name))).To(Equal(corev1.ConditionUnknown))
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		// Down long enough that the nodes were Unknown for longer than the pods' failover-seconds
		// (10 s) and --failover-after (5 s) together, with 5 s to spare.
		time.Sleep(20 * time.Second)
		AddReportEntry("manager down", time.Since(stopped).Round(time.Second).String())
		// It starts again without its registration Secret: it knew the clusters (ClusterDetectors),
		// so no virtual node is deleted and no proxy released.
		secrets := bed.Primary.Clientset.CoreV1().Secrets(flotillav1.SystemNamespace)
		registration, err := secrets.Get(ctx, flotillav1.KubeconfigSecretName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(secrets.Delete(ctx, flotillav1.KubeconfigSecretName, metav1.DeleteOptions{})).To(Succeed())
		manager, err = startManager(managerBin, managerKubeconfig, filepath.Join(workDir, "manager.log"))
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() (int, error) { return httpStatus(http.DefaultClient, manager.probeURL+"/healthz") }).
			WithContext(ctx).WithTimeout(30 * time.Second).Should(Equal(http.StatusOK))
		Consistently(func(g Gomega) {
			for _, c := range []*testbed.Cluster{s1, s2} {
				_, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, flotillav1.VirtualNodeName(c.Name), metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred(), "virtual node of %s", c.Name)
			}
			proxies, _ := uids(g)
			g.Expect(proxies).To(Equal(proxiesBefore), "no proxy was released")
		}).WithContext(ctx).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())
		registration.ResourceVersion, registration.UID = "", ""
		_, err = secrets.Create(ctx, registration, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		start := time.Now()
		Eventually(func(g Gomega) {
			for _, c := range []*testbed.Cluster{s1, s2} {
				expectRunningAndReady(g, ctx, c.Name)
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		AddReportEntry("manager restart to Ready", time.Since(start).Round(100*time.Millisecond).String())
		Consistently(func(g Gomega) {
			proxies, delegates := uids(g)
			g.Expect(proxies).To(Equal(proxiesBefore), "no proxy was evicted or replaced")
			g.Expect(delegates).To(Equal(delegatesBefore), "no delegate was replaced")
		}).WithContext(ctx).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(bed.Primary.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})).To(Succeed())
	}, SpecTimeout(5*time.Minute))

	It("follows its secondary's nodes' region on the virtual node: to a new region, and away when the nodes disagree", func(ctx SpecContext) {
		relabel := func(ctx context.Context, regions ...string) {
			nodes, err := s1.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(len(nodes.Items)).To(BeNumerically(">=", 2), "the bed gives each secondary 2 nodes")
			for i, n := range nodes.Items {
				region := regions[min(i, len(regions)-1)]
				_, err := s1.Clientset.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType,
					[]byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, corev1.LabelTopologyRegion, region)), metav1.PatchOptions{})
				Expect(err).NotTo(HaveOccurred())
			}
		}
		regionOf := func(ctx context.Context) (string, bool) {
			n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, flotillav1.VirtualNodeName(s1.Name), metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			r, ok := n.Labels[flotillav1.LabelRegion]
			return r, ok
		}
		DeferCleanup(func(ctx SpecContext) {
			relabel(ctx, testbed.Region(s1.Name))
			Eventually(func() string { r, _ := regionOf(ctx); return r }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Equal(testbed.Region(s1.Name)))
		})
		relabel(ctx, "region-moved")
		Eventually(func() string { r, _ := regionOf(ctx); return r }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Equal("region-moved"))
		relabel(ctx, "region-moved", "region-split")
		Eventually(func() bool { _, ok := regionOf(ctx); return ok }).WithContext(ctx).WithTimeout(30*time.Second).Should(BeFalse(),
			"the nodes disagree: no region")
	}, SpecTimeout(2*time.Minute))

	It("fences a secondary with the out-of-service taint, and unfences it", func(ctx SpecContext) {
		name := flotillav1.VirtualNodeName(s2.Name)
		taints := func() ([]corev1.Taint, error) {
			n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return n.Spec.Taints, nil
		}
		out, err := flotillactl(ctx, "cluster", "fence", s2.Name)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(taints()).To(ContainElement(HaveField("Key", corev1.TaintNodeOutOfService)))
		// Flotilla's own taint reconciliation keeps others' taints.
		Consistently(taints).WithContext(ctx).WithTimeout(12 * time.Second).Should(ContainElement(HaveField("Key", corev1.TaintNodeOutOfService)))
		out, err = flotillactl(ctx, "cluster", "fence", s2.Name, "--undo")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(taints()).NotTo(ContainElement(HaveField("Key", corev1.TaintNodeOutOfService)))
	}, SpecTimeout(time.Minute))

	It("removes a secondary running a 10-replica elected Deployment within 2 minutes: all 10 Running in the other, nothing of this primary's left in the removed one", func(ctx SpecContext) {
		const space = "removed"
		_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: space, Labels: map[string]string{flotillav1.LabelEnabled: "true"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		ten := int32(10)
		sel := map[string]string{"app": "moving"}
		_, err = bed.Primary.Clientset.AppsV1().Deployments(space).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "moving"},
			Spec: appsv1.DeploymentSpec{Replicas: &ten, Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			g.Expect(runningProxies(ctx, g, space, "app=moving", "")).To(Equal(10))
			g.Expect(podsInPhase(delegatesIn(ctx, s2, space), corev1.PodRunning)).To(BeNumerically(">", 0))
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())

		// What remove would do, as one document, changing nothing: the drain evicts this spec's
		// proxies there, and join's objects in s2 would go.
		out, err := flotillactl(ctx, "cluster", "remove", s2.Name, "--force", "--dry-run", "-o", "json")
		Expect(err).NotTo(HaveOccurred(), out)
		var plan struct {
			Kind  string `json:"kind"`
			Drain struct {
				Evict []struct {
					Namespace string `json:"namespace"`
				} `json:"evict"`
			} `json:"drain"`
			Secondary struct {
				Unreachable string   `json:"unreachable"`
				Access      []string `json:"access"`
			} `json:"secondary"`
		}
		Expect(json.NewDecoder(strings.NewReader(out[strings.Index(out, "{"):])).Decode(&plan)).To(Succeed(), out)
		Expect(plan.Kind).To(Equal("RemovePlan"))
		Expect(plan.Drain.Evict).To(ContainElement(HaveField("Namespace", space)), out)
		Expect(plan.Secondary.Unreachable).To(BeEmpty(), out)
		Expect(plan.Secondary.Access).NotTo(BeEmpty(), "join's objects in %s: %s", s2.Name, out)
		node, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, flotillav1.VirtualNodeName(s2.Name), metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(node.Spec.Unschedulable).To(BeFalse(), "the dry run cordoned %s", node.Name)
		Expect(runningProxies(ctx, Default, space, "app=moving", "")).To(Equal(10), "the dry run moved a proxy")

		start := time.Now()
		// remove drains first; --force lets it evict what other specs may have left in s2 that no
		// controller owns (their pods of one name, elected there).
		out, err = flotillactl(ctx, "cluster", "remove", s2.Name, "--timeout", "2m", "--force")
		Expect(err).NotTo(HaveOccurred(), out)
		took := time.Since(start)
		AddReportEntry("cluster remove with 10 elected replicas", took.Round(100*time.Millisecond).String())
		Expect(took).To(BeNumerically("<", 2*time.Minute))
		Expect(out).To(ContainSubstring("Removed this primary's access to " + s2.Name))
		Expect(out).To(ContainSubstring("Drained " + s2.Name))
		Eventually(func(g Gomega) int {
			return runningProxies(ctx, g, space, "app=moving", flotillav1.VirtualNodeName(s1.Name))
		}).
			WithContext(ctx).WithTimeout(60 * time.Second).Should(Equal(10))
		// Nothing of this primary's in the removed secondary: the namespace it created, its
		// identity, its rights, its admission policy.
		names := access.NamesFor(primaryID(ctx))
		Eventually(func(g Gomega) {
			_, err := s2.Clientset.CoreV1().Namespaces().Get(ctx, space, metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "namespace %s: %v", space, err)
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		_, err = s2.Clientset.CoreV1().ServiceAccounts(flotillav1.SystemNamespace).Get(ctx, names.ServiceAccount, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ServiceAccount: %v", err)
		_, err = s2.Clientset.RbacV1().ClusterRoles().Get(ctx, names.ClusterRole, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ClusterRole: %v", err)
		_, err = s2.Clientset.RbacV1().ClusterRoleBindings().Get(ctx, names.ClusterRole, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ClusterRoleBinding: %v", err)
		_, err = s2.Clientset.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, names.Policy, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ValidatingAdmissionPolicy: %v", err)

		// Back for the specs that follow, at the address it had.
		out, err = flotillactl(ctx, "cluster", "join", "--secondary-context", s2.Name, "--token-duration", "10m", "--server", serverAtHostIP(s2))
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func(g Gomega) { expectRunningAndReady(g, ctx, s2.Name) }).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		Expect(bed.Primary.Clientset.CoreV1().Namespaces().Delete(ctx, space, metav1.DeleteOptions{})).To(Succeed())
	}, SpecTimeout(5*time.Minute))

	It("removes a secondary with --orphan: its node, ClusterDetector and FlotillaPrimary are gone within 30 s, its delegates keep running", func(ctx SpecContext) {
		const space = "orphaned"
		_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: space, Labels: map[string]string{flotillav1.LabelEnabled: "true"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		prepareNamespace(ctx, s2, space)
		_, err = bed.Primary.Clientset.CoreV1().Pods(space).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stays",
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s2.Name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		var delegateUID string
		Eventually(func(g Gomega) {
			d, err := s2.Clientset.CoreV1().Pods(space).Get(ctx, "stays", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Status.Phase).To(Equal(corev1.PodRunning))
			delegateUID = string(d.UID)
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

		start := time.Now()
		out, err := flotillactl(ctx, "cluster", "remove", s2.Name, "--orphan", "--timeout", "30s")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(time.Since(start)).To(BeNumerically("<", 30*time.Second))
		_, err = bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, flotillav1.VirtualNodeName(s2.Name), metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue())
		_, err = detector(ctx, s2.Name)
		Expect(apierrors.IsNotFound(err)).To(BeTrue())
		Eventually(func() bool {
			err := clientOf(s2).Get(ctx, client.ObjectKey{Name: primaryID(ctx)}, &flotillav1.FlotillaPrimary{})
			return apierrors.IsNotFound(err)
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(BeTrue())
		AddReportEntry("remove to gone", time.Since(start).Round(100*time.Millisecond).String())
		expectRunningAndReady(Default, ctx, s1.Name)
		out, err = flotillactl(ctx, "cluster", "list")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).NotTo(ContainSubstring(s2.Name))
		Consistently(func(g Gomega) {
			d, err := s2.Clientset.CoreV1().Pods(space).Get(ctx, "stays", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred(), "the orphaned delegate is gone")
			g.Expect(string(d.UID)).To(Equal(delegateUID))
			g.Expect(d.DeletionTimestamp).To(BeNil())
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		zero := int64(0)
		Expect(s2.Clientset.CoreV1().Pods(space).Delete(ctx, "stays", metav1.DeleteOptions{GracePeriodSeconds: &zero})).To(Succeed())
		Expect(bed.Primary.Clientset.CoreV1().Namespaces().Delete(ctx, space, metav1.DeleteOptions{})).To(Succeed())
	}, SpecTimeout(2*time.Minute))
})

// primaryID is the primary's kube-system UID.
func primaryID(ctx SpecContext) string {
	ns, err := bed.Primary.Clientset.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	return string(ns.UID)
}

// bigSecondaryPods is how many pods the big-secondary spec creates: $FLOTILLA_E2E_BIG_SECONDARY_PODS,
// default 20000.
func bigSecondaryPods() int {
	if v, err := strconv.Atoi(os.Getenv("FLOTILLA_E2E_BIG_SECONDARY_PODS")); err == nil && v > 0 {
		return v
	}
	return 20000
}

func bigPodName(i int) string { return fmt.Sprintf("big-%05d", i) }
