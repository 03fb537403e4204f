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
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// Claims of class flotilla follow elected pods: the real claim is made in the secondary where the
// pod runs (provisioned there by the bed's local-path-provisioner, on the secondary's real node),
// the primary's claim is bound to a volume that stands for it, and the data decides where the
// pod's successors go. The specs that stop a secondary or register one again run alone, in a
// namespace of their own.
var _ = Describe("stateful workloads", Ordered, Label("real-nodes"), func() {
	const ns = "stateful-volumes"
	f := storageFixture{ns: ns}

	BeforeAll(func(ctx SpecContext) { f.setUp(ctx) })

	It("runs an elected StatefulSet of 3 on claims of class flotilla: each Bound in the primary at its secondary's size and where its pod runs, and a pod's successor reads what it wrote", func(ctx SpecContext) {
		labels := map[string]string{"app": "web"}
		container := appContainer("web", nil)
		container.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
			Spec: onRealNode(container)}
		three := int32(3)
		_, err := bed.Primary.Clientset.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.StatefulSetSpec{Replicas: &three, ServiceName: "web", Selector: &metav1.LabelSelector{MatchLabels: labels},
				PodManagementPolicy: appsv1.ParallelPodManagement, Template: tmpl,
				VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
					Spec: flotillaClaim(corev1.ReadWriteOnce)}},
			}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		where := map[string]string{} // pod: its cluster
		Eventually(func(g Gomega) {
			for i := range 3 {
				pod := fmt.Sprintf("web-%d", i)
				cluster := f.clusterOfProxy(g, ctx, pod)
				where[pod] = cluster
				claim := "data-" + pod
				pvc, err := bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound), "claim %s in the primary", claim)
				g.Expect(pvc.Annotations).To(HaveKeyWithValue(flotillav1.AnnotationVolumeCluster, cluster))
				real, err := secondaryNamed(cluster).Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred(), "the real claim %s in %s", claim, cluster)
				g.Expect(real.Status.Phase).To(Equal(corev1.ClaimBound), "the real claim %s in %s", claim, cluster)
				g.Expect(pvc.Status.Capacity.Storage().String()).To(Equal(real.Status.Capacity.Storage().String()), "the primary claim shows its secondary's size")
				pv, err := bed.Primary.Clientset.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(pv.Annotations).To(HaveKeyWithValue(flotillav1.AnnotationRealVolume, real.Spec.VolumeName), "kubectl get pv says which volume, and which cluster")
				g.Expect(pv.Labels).To(HaveKeyWithValue(flotillav1.LabelCluster, cluster))
			}
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		AddReportEntry("pods per cluster", fmt.Sprint(where))

		out, err := kubectlIn(ctx, ns, nil, "exec", "web-0", "--", "sh", "-c", "echo kept-across-pods > /data/f; cat /data/f")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("kept-across-pods"))
		old, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, "web-0", metav1.DeleteOptions{})).To(Succeed())
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.UID).NotTo(Equal(old.UID), "the successor")
			g.Expect(f.clusterOfProxy(g, ctx, "web-0")).To(Equal(where["web-0"]), "the data decides the cluster")
			out, err := kubectlIn(ctx, ns, nil, "exec", "web-0", "--", "cat", "/data/f")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("kept-across-pods"))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	}, SpecTimeout(5*time.Minute))

	It("follows the StatefulSet's retention policy: scaled down with whenScaled Delete, that ordinal's real claim goes too", func(ctx SpecContext) {
		labels := map[string]string{"app": "kv"}
		container := appContainer("kv", nil)
		container.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		two := int32(2)
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "kv"},
			Spec: appsv1.StatefulSetSpec{Replicas: &two, ServiceName: "kv", Selector: &metav1.LabelSelector{MatchLabels: labels},
				PodManagementPolicy: appsv1.ParallelPodManagement,
				PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
					WhenScaled: appsv1.DeletePersistentVolumeClaimRetentionPolicyType, WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
					Spec: onRealNode(container)},
				VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
					Spec: flotillaClaim(corev1.ReadWriteOnce)}},
			}}
		_, err := bed.Primary.Clientset.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		where := map[string]string{}
		Eventually(func(g Gomega) {
			for _, pod := range []string{"kv-0", "kv-1"} {
				where[pod] = f.clusterOfProxy(g, ctx, pod)
				real, err := secondaryNamed(where[pod]).Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-"+pod, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(real.Status.Phase).To(Equal(corev1.ClaimBound))
			}
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())

		_, err = bed.Primary.Clientset.AppsV1().StatefulSets(ns).Patch(ctx, "kv", types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			_, err := bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-kv-1", metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the primary claim of the ordinal scaled away: %v", err)
			_, err = secondaryNamed(where["kv-1"]).Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-kv-1", metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "its real claim in %s: %v", where["kv-1"], err)
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
		real, err := secondaryNamed(where["kv-0"]).Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-kv-0", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the ordinal kept keeps its claim")
		Expect(real.DeletionTimestamp).To(BeNil())

		// whenDeleted Delete: the StatefulSet's deletion takes the claims, and Flotilla the real ones.
		Expect(bed.Primary.Clientset.AppsV1().StatefulSets(ns).Delete(ctx, "kv", metav1.DeleteOptions{})).To(Succeed())
		Eventually(func(g Gomega) {
			_, err := secondaryNamed(where["kv-0"]).Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-kv-0", metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the real claim of kv-0 in %s: %v", where["kv-0"], err)
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
	}, SpecTimeout(5*time.Minute))

	It("gives a generic ephemeral volume of class flotilla a real claim where its pod runs, and takes it away with the pod", func(ctx SpecContext) {
		container := appContainer("cache", nil)
		container.VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
		spec := onRealNode(container)
		spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
			VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: flotillaClaim(corev1.ReadWriteOnce)}}}}}
		_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cache",
			Annotations: map[string]string{flotillav1.AnnotationElect: ""}}, Spec: spec}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		var home string
		Eventually(func(g Gomega) {
			home = f.clusterOfProxy(g, ctx, "cache")
			out, err := kubectlIn(ctx, ns, nil, "exec", "cache", "--", "sh", "-c", "echo scratch-data > /scratch/f; cat /scratch/f")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("scratch-data"))
			real, err := secondaryNamed(home).Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "cache-scratch", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(real.Status.Phase).To(Equal(corev1.ClaimBound))
			pvc, err := bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "cache-scratch", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())

		Expect(bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, "cache", metav1.DeleteOptions{})).To(Succeed())
		Eventually(func(g Gomega) {
			_, err := bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "cache-scratch", metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the primary's ephemeral claim: %v", err)
			_, err = secondaryNamed(home).Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "cache-scratch", metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "its real claim in %s: %v", home, err)
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
	}, SpecTimeout(4*time.Minute))

	It("deletes the real claims, and the volumes that stood for them, only with the primary's claims: none is left in any cluster", func(ctx SpecContext) {
		Expect(bed.Primary.Clientset.AppsV1().StatefulSets(ns).Delete(ctx, "web", metav1.DeleteOptions{})).To(Succeed())
		Eventually(func(g Gomega) {
			pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		// The StatefulSet is gone, its claims are not (its retention policy: Retain): their data stays.
		for _, c := range bed.Secondaries {
			real, err := c.Clientset.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred())
			for _, r := range real.Items {
				Expect(r.DeletionTimestamp).To(BeNil(), "claim %s in %s", r.Name, c.Name)
			}
		}
		for i := range 3 {
			Expect(bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, fmt.Sprintf("data-web-%d", i), metav1.DeleteOptions{})).To(Succeed())
		}
		Eventually(func(g Gomega) {
			claims, err := bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(claims.Items).To(BeEmpty(), "claims in the primary")
			pvs, err := bed.Primary.Clientset.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			// This namespace's: other groups' claims may stand in the primary meanwhile.
			for _, pv := range pvs.Items {
				if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == ns {
					g.Expect(pv.Spec.StorageClassName).NotTo(Equal(flotillav1.StorageClassRemote), "volume %s in the primary", pv.Name)
				}
			}
			for _, c := range bed.Secondaries {
				real, err := c.Clientset.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(real.Items).To(BeEmpty(), "claims in %s", c.Name)
				pvs, err := c.Clientset.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				for _, pv := range pvs.Items {
					g.Expect(pv.Spec.ClaimRef).To(Or(BeNil(), HaveField("Namespace", Not(Equal(ns)))), "volume %s in %s", pv.Name, c.Name)
				}
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
	}, SpecTimeout(4*time.Minute))

	It("shows its secondary's provisioning failure on the primary claim, with the secondary's message", func(ctx SpecContext) {
		// The bed's provisioner makes ReadWriteOnce volumes only.
		_, err := bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "shared"},
			Spec: flotillaClaim(corev1.ReadWriteMany)}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		spec := onRealNode(appContainer("shared", nil))
		spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared"}}}}
		_, err = bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "shared",
			Annotations: map[string]string{flotillav1.AnnotationElect: ""}}, Spec: spec}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, "shared", metav1.DeleteOptions{})
			_ = bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "shared", metav1.DeleteOptions{})
		})
		Eventually(func(g Gomega) {
			evs, err := bed.Primary.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=PersistentVolumeClaim,involvedObject.name=shared"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(evs.Items).To(ContainElement(And(HaveField("Type", corev1.EventTypeWarning), HaveField("Reason", "ProvisioningFailed"),
				HaveField("Message", And(HavePrefix("In cluster secondary"), ContainSubstring("ReadWriteOnce"))))))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("refuses an elected pod whose claim is of another class, with the reason", func(ctx SpecContext) {
		_, err := bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "local-data"},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("standard"), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		spec := onRealNode(appContainer("web", nil))
		spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "local-data"}}}}
		_, err = bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "local",
			Annotations: map[string]string{flotillav1.AnnotationElect: ""}}, Spec: spec}, metav1.CreateOptions{})
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(And(ContainSubstring(`claim local-data of storage class "standard"`), ContainSubstring("only claims of class flotilla follow an elected pod")))
		Expect(strings.Contains(err.Error(), "denied")).To(BeTrue(), err.Error())
	}, SpecTimeout(time.Minute))
})

var _ = Describe("stateful workloads", Ordered, Serial, Label("disruptive", "real-nodes"), func() {
	const ns = "stateful"
	f := storageFixture{ns: ns}

	BeforeAll(func(ctx SpecContext) { f.setUp(ctx) })

	// recreatePod starts an elected StatefulSet of one pod that chose
	// on-volume-cluster-loss: recreate (and annotations), with a 5 s grace period (at most once,
	// its evicted proxy is released only once it is over), and has it write /data/f where it
	// runs: it returns that cluster and the other one.
	recreatePod := func(ctx SpecContext, name string, annotations map[string]string) (home *testbed.Cluster, elsewhere string) {
		labels := map[string]string{"app": name}
		container := appContainer(name, nil)
		container.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		spec := onRealNode(container)
		spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
		a := map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationOnVolumeClusterLoss: flotillav1.OnVolumeClusterLossRecreate}
		maps.Copy(a, annotations)
		_, err := bed.Primary.Clientset.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), ServiceName: name, Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: a}, Spec: spec},
				VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
					Spec: flotillaClaim(corev1.ReadWriteOnce)}},
			}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = bed.Primary.Clientset.AppsV1().StatefulSets(ns).Delete(ctx, name, metav1.DeleteOptions{})
			_ = bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data-"+name+"-0", metav1.DeleteOptions{})
		})
		var at string
		Eventually(func(g Gomega) {
			at = f.clusterOfProxy(g, ctx, name+"-0")
			out, err := kubectlIn(ctx, ns, nil, "exec", name+"-0", "--", "sh", "-c", "echo written-at-home > /data/f; cat /data/f")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("written-at-home"))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		home = secondaryNamed(at)
		for _, o := range bed.Secondaries {
			if o != home {
				elsewhere = o.Name
			}
		}
		return home, elsewhere
	}

	// One outage of the cluster holding two pods' data: one that stays with its data (the
	// default) and one that chose recreate. Both pods are placed there first: the recreate one
	// wherever placement puts it, the other by weights that prefer that cluster but allow the
	// other, so that nothing but its data keeps it home once that cluster stops.
	It("keeps a pod with the cluster holding its data while that cluster is stopped (never re-created elsewhere, no claim deleted) and runs it there on the same volume when it is back, while a pod that chose recreate starts on a fresh, empty claim in the other cluster after the failover bound, its old claim kept in the stopped cluster until its primary claim is deleted", func(ctx SpecContext) {
		c, elsewhere := recreatePod(ctx, "cache", map[string]string{flotillav1.AnnotationFailoverSeconds: "10"})
		home := c.Name

		labels := map[string]string{"app": "db"}
		container := appContainer("db", nil)
		container.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		one := int32(1)
		_, err := bed.Primary.Clientset.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Spec: appsv1.StatefulSetSpec{Replicas: &one, ServiceName: "db", Selector: &metav1.LabelSelector{MatchLabels: labels},
				// A short failover: the proxy is evicted soon after its cluster is unreachable.
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels,
					Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationFailoverSeconds: "10",
						flotillav1.AnnotationClusterWeights: fmt.Sprintf("%s=100,%s=1", home, elsewhere)}}, Spec: onRealNode(container)},
				VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
					Spec: flotillaClaim(corev1.ReadWriteOnce)}},
			}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = bed.Primary.Clientset.AppsV1().StatefulSets(ns).Delete(ctx, "db", metav1.DeleteOptions{})
			_ = bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data-db-0", metav1.DeleteOptions{})
		})
		Eventually(func(g Gomega) {
			g.Expect(f.clusterOfProxy(g, ctx, "db-0")).To(Equal(home))
			out, err := kubectlIn(ctx, ns, nil, "exec", "db-0", "--", "sh", "-c", "echo survives-its-cluster > /data/f; cat /data/f")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("survives-its-cluster"))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		var others []*testbed.Cluster
		for _, o := range bed.Secondaries {
			if o != c {
				others = append(others, o)
			}
		}

		startAgain := stopForSpec(ctx, c)
		stoppedAt := time.Now()
		// The failover taint, the pods' 10 s, the recreate pod's release, its successor placed
		// elsewhere on a new claim there: running, and the claim empty.
		Eventually(func(g Gomega) {
			g.Expect(f.clusterOfProxy(g, ctx, "cache-0")).To(Equal(elsewhere))
			out, err := kubectlIn(ctx, ns, nil, "exec", "cache-0", "--", "sh", "-c", "test -e /data/f && echo old-data || echo fresh")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("fresh"))
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		AddReportEntry("recreated elsewhere after the cluster stopped", time.Since(stoppedAt).Round(time.Second).String())
		n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, flotillav1.VirtualNodeName(home), metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(n.Spec.Taints).To(ContainElement(HaveField("Key", flotillav1.TaintUnreachable)))
		pvc, err := bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-cache-0", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(pvc.Annotations).To(HaveKeyWithValue(flotillav1.AnnotationVolumeCluster, elsewhere))
		Expect(pvc.Annotations).To(HaveKeyWithValue(flotillav1.AnnotationVolumeRetainedIn, home))
		Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound))
		pv, err := bed.Primary.Clientset.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(pv.Labels).To(HaveKeyWithValue(flotillav1.LabelCluster, elsewhere), "kubectl get pv names the cluster that holds it now")
		Eventually(func(g Gomega) {
			evs, err := bed.Primary.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=cache-0,reason=" + flotillav1.ReasonVolumeClusterLost})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(evs.Items).NotTo(BeEmpty(), "a Warning Event on the pod")
			g.Expect(evs.Items[0].Type).To(Equal(corev1.EventTypeWarning))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		// Past the node's unreachable taint and the pod's 10 s failover (the recreate pod, with the
		// same 10 s, has moved already): the one that stays with its data is evicted, stays
		// Terminating (at-most-once), and nothing of it runs anywhere else, though its weights
		// allow the other cluster.
		Consistently(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Spec.NodeName).To(Equal(flotillav1.VirtualNodeName(home)), "db-0 is never placed elsewhere")
			for _, o := range others {
				there, err := o.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=db"})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(there.Items).To(BeEmpty(), "db in %s", o.Name)
			}
			pvc, err := bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-db-0", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pvc.DeletionTimestamp).To(BeNil())
			g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound))
		}).WithContext(ctx).WithTimeout(15 * time.Second).WithPolling(time.Second).Should(Succeed())

		// Back: the pod that stayed runs there on its data; the recreate pod's old delegate is
		// swept, its old claim (and the data on it) kept.
		startAgain(ctx)
		Eventually(func(g Gomega) {
			g.Expect(f.clusterOfProxy(g, ctx, "db-0")).To(Equal(home))
			out, err := kubectlIn(ctx, ns, nil, "exec", "db-0", "--", "cat", "/data/f")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("survives-its-cluster"))
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		real, err := c.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-db-0", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(real.DeletionTimestamp).To(BeNil())
		Eventually(func(g Gomega) {
			pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=cache"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(BeEmpty(), "the old delegate in %s", home)
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			real, err := c.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-cache-0", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred(), "the claim kept in %s", home)
			g.Expect(real.DeletionTimestamp).To(BeNil())
		}).WithContext(ctx).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())

		// Deleted with its primary claim: both real claims go.
		Expect(bed.Primary.Clientset.AppsV1().StatefulSets(ns).Delete(ctx, "cache", metav1.DeleteOptions{})).To(Succeed())
		Expect(bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data-cache-0", metav1.DeleteOptions{})).To(Succeed())
		Eventually(func(g Gomega) {
			for _, sec := range bed.Secondaries {
				_, err := sec.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-cache-0", metav1.GetOptions{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the real claim in %s: %v", sec.Name, err)
			}
			_, err := bed.Primary.Clientset.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the stand-in volume: %v", err)
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	}, SpecTimeout(10*time.Minute))

	It("drains a cluster holding the data of a pod that chose recreate: its successor starts elsewhere on a fresh claim, the drain succeeds, the old claim is kept", func(ctx SpecContext) {
		c, elsewhere := recreatePod(ctx, "drained", nil)
		home := c.Name
		DeferCleanup(func(ctx SpecContext) {
			out, err := flotillactl(ctx, "cluster", "uncordon", home)
			Expect(err).NotTo(HaveOccurred(), out)
			n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, flotillav1.VirtualNodeName(home), metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(n.Annotations).NotTo(HaveKey(flotillav1.AnnotationDraining), "uncordon ends the drain's mark")
		})
		start := time.Now()
		// --force: a bare elected pod another spec left there must not refuse this drain.
		out, err := flotillactl(ctx, "cluster", "drain", home, "--timeout", "150s", "--force")
		Expect(err).NotTo(HaveOccurred(), "the drain does not leave the pod Pending for ever: %s", out)
		AddReportEntry("drained a recreate pod's data cluster", time.Since(start).Round(time.Second).String())
		Eventually(func(g Gomega) {
			g.Expect(f.clusterOfProxy(g, ctx, "drained-0")).To(Equal(elsewhere))
			out, err := kubectlIn(ctx, ns, nil, "exec", "drained-0", "--", "sh", "-c", "test -e /data/f && echo old-data || echo fresh")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("fresh"))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		pvc, err := bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-drained-0", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(pvc.Annotations).To(HaveKeyWithValue(flotillav1.AnnotationVolumeCluster, elsewhere))
		Expect(pvc.Annotations).To(HaveKeyWithValue(flotillav1.AnnotationVolumeRetainedIn, home))
		real, err := c.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-drained-0", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the old claim kept in %s", home)
		Expect(real.DeletionTimestamp).To(BeNil())
	}, SpecTimeout(6*time.Minute))

	It("keeps a pod with a claim out of a secondary whose registration takes no claims (cluster join --storage-class none), saying so", func(ctx SpecContext) {
		s2 := bed.Secondaries[1]
		out, err := flotillactl(ctx, "cluster", "join", "--secondary-context", s2.Name, "--token-duration", "10m", "--storage-class", "none")
		Expect(err).NotTo(HaveOccurred(), out)
		DeferCleanup(func(ctx SpecContext) {
			out, err := flotillactl(ctx, "cluster", "join", "--secondary-context", s2.Name, "--token-duration", "10m", "--storage-class", "default")
			Expect(err).NotTo(HaveOccurred(), out)
		})
		Eventually(func(g Gomega) {
			cd, err := detector(ctx, s2.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cd.Status.StorageClass).To(Equal("none"))
			out, err := flotillactl(ctx, "cluster", "list")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("STORAGECLASS"))
			g.Expect(out).To(MatchRegexp(`(?m)^`+s2.Name+`\s.*\snone\s+push\s*$`), "STORAGECLASS none, then MODE push")
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		_, err = bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nowhere"},
			Spec: flotillaClaim(corev1.ReadWriteOnce)}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		spec := onRealNode(appContainer("nowhere", nil))
		spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "nowhere"}}}}
		_, err = bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nowhere",
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s2.Name}}, Spec: spec}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, "nowhere", metav1.DeleteOptions{})
			_ = bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "nowhere", metav1.DeleteOptions{})
		})
		p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "nowhere", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(p.Spec.NodeName).To(BeEmpty())
		Expect(p.Annotations[flotillav1.AnnotationNoClusterFits]).To(ContainSubstring(s2.Name + ": it takes no claims of class flotilla"))
		Consistently(func(g Gomega) {
			there, err := s2.Clientset.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
			if !apierrors.IsNotFound(err) {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(there.Items).NotTo(ContainElement(HaveField("Name", "nowhere")))
			}
		}).WithContext(ctx).WithTimeout(5 * time.Second).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	// joinWithClass registers secondary s again, its claims of class flotilla made of class class,
	// for the spec; DeferCleanup registers it as before.
	joinWithClass := func(ctx SpecContext, s *testbed.Cluster, class string) {
		out, err := flotillactl(ctx, "cluster", "join", "--secondary-context", s.Name, "--token-duration", "10m", "--storage-class", class)
		Expect(err).NotTo(HaveOccurred(), out)
		DeferCleanup(func(ctx SpecContext) {
			out, err := flotillactl(ctx, "cluster", "join", "--secondary-context", s.Name, "--token-duration", "10m", "--storage-class", "default")
			Expect(err).NotTo(HaveOccurred(), out)
		})
		Eventually(func(g Gomega) {
			cd, err := detector(ctx, s.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cd.Status.StorageClass).To(Equal(class))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	}
	// boundOnFakeNode runs an elected pod on a fake node of secondary s with a 1Gi claim of class
	// flotilla, both called name, and returns once the claim is Bound in the primary and in s.
	// DeferCleanup deletes both and waits until the claim is gone.
	boundOnFakeNode := func(ctx SpecContext, s *testbed.Cluster, name string) {
		_, err := bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: flotillaClaim(corev1.ReadWriteOnce)}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		spec := corev1.PodSpec{Containers: []corev1.Container{appContainer(name, nil)},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}}}
		_, err = bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s.Name}}, Spec: spec}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})
			_ = bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{})
			Eventually(func(g Gomega) {
				_, err := bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "claim %s still there: %v", name, err)
			}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		})
		Eventually(func(g Gomega) {
			g.Expect(f.clusterOfProxy(g, ctx, name)).To(Equal(s.Name))
			pvc, err := bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound), "claim %s in the primary", name)
			real, err := s.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(real.Status.Phase).To(Equal(corev1.ClaimBound), "the real claim %s in %s", name, s.Name)
			g.Expect(real.Status.Capacity.Storage().String()).To(Equal("1Gi"))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	}
	grow := func(ctx SpecContext, name, size string) {
		patch := fmt.Sprintf(`{"spec":{"resources":{"requests":{"storage":%q}}}}`, size)
		_, err := bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
	}

	It("says so on the primary claim when its secondary's class does not allow expansion (ExpansionFailed), and the claims keep their size", func(ctx SpecContext) {
		s2 := bed.Secondaries[1]
		const fixed = "fixed-size"
		_, err := s2.Clientset.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: fixed},
			Provisioner: testbed.LocalPathProvisioner, VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
			AllowVolumeExpansion: ptr.To(false)}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = s2.Clientset.StorageV1().StorageClasses().Delete(ctx, fixed, metav1.DeleteOptions{})
		})
		joinWithClass(ctx, s2, fixed)
		boundOnFakeNode(ctx, s2, "fixed")

		grow(ctx, "fixed", "2Gi")
		Eventually(func(g Gomega) {
			evs, err := bed.Primary.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=PersistentVolumeClaim,involvedObject.name=fixed"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(evs.Items).To(ContainElement(And(HaveField("Type", corev1.EventTypeWarning), HaveField("Reason", "ExpansionFailed"),
				HaveField("Message", ContainSubstring("Cluster "+s2.Name+" refused to expand the claim to 2Gi")))))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		real, err := s2.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "fixed", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(real.Spec.Resources.Requests.Storage().String()).To(Equal("1Gi"))
		pvc, err := bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "fixed", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(pvc.Status.Capacity.Storage().String()).To(Equal("1Gi"))
	}, SpecTimeout(4*time.Minute))

	It("expands a claim of class flotilla end to end on a resizing CSI driver: the real claim grows (VolumeResizeSuccessful), the primary's claim and stand-in volume show it, the pod keeps running; a size the driver cannot make is refused with its reason on the primary's claim, and asking less recovers", func(ctx SpecContext) {
		s2 := bed.Secondaries[1]
		if !s2.ResizableStorage {
			Skip(s2.Name + " runs no resizing CSI stack (testbed.Options.ResizableStorage): the bed with real nodes has it")
		}
		joinWithClass(ctx, s2, testbed.StorageClassResizable)
		boundOnFakeNode(ctx, s2, "grows")
		delegate := func(g Gomega) corev1.Pod {
			pods, err := s2.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: flotillav1.LabelPrimary})
			g.Expect(err).NotTo(HaveOccurred())
			var found []corev1.Pod
			for _, p := range pods.Items {
				if slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool {
					return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "grows"
				}) {
					found = append(found, p)
				}
			}
			g.Expect(found).To(HaveLen(1), "the delegate using claim grows in %s", s2.Name)
			g.Expect(found[0].Status.Phase).To(Equal(corev1.PodRunning))
			return found[0]
		}
		var before corev1.Pod
		Eventually(func(g Gomega) { before = delegate(g) }).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		realEvents := func(g Gomega, reason string) []corev1.Event {
			real, err := s2.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "grows", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			evs, err := s2.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(real.UID) + ",reason=" + reason})
			g.Expect(err).NotTo(HaveOccurred())
			return evs.Items
		}
		// sized: the real claim, the primary claim and its stand-in volume all at size.
		sized := func(g Gomega, size string) {
			real, err := s2.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "grows", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(real.Status.Capacity.Storage().String()).To(Equal(size), "the real claim in %s", s2.Name)
			pvc, err := bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "grows", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pvc.Status.Capacity.Storage().String()).To(Equal(size), "the primary's claim")
			g.Expect(pvc.Status.Conditions).To(BeEmpty(), "the primary's claim once its expansion is done")
			pv, err := bed.Primary.Clientset.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pv.Spec.Capacity.Storage().String()).To(Equal(size), "the stand-in volume %s", pv.Name)
		}

		start := time.Now()
		grow(ctx, "grows", "2Gi")
		Eventually(func(g Gomega) {
			sized(g, "2Gi")
			g.Expect(realEvents(g, "VolumeResizeSuccessful")).NotTo(BeEmpty(), "the external-resizer's Event on the real claim")
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("1Gi to 2Gi, asked in the primary to shown there", time.Since(start).Round(100*time.Millisecond).String())
		after := delegate(Default)
		Expect(after.UID).To(Equal(before.UID), "the same delegate runs on the grown volume")
		Expect(after.Status.ContainerStatuses).To(HaveEach(HaveField("RestartCount", BeZero())))

		// Beyond the driver's largest volume: the resizer's refusal, with the driver's words, on
		// the primary's claim as a condition and an Event; the sizes stay.
		grow(ctx, "grows", "8Gi")
		Eventually(func(g Gomega) {
			pvc, err := bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "grows", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pvc.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.PersistentVolumeClaimControllerResizeError),
				HaveField("Message", And(HavePrefix("In cluster "+s2.Name+": "), ContainSubstring("largest volume, "+testbed.CSIMockMaxVolumeSize))))))
			g.Expect(pvc.Status.Capacity.Storage().String()).To(Equal("2Gi"))
			evs, err := bed.Primary.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=PersistentVolumeClaim,involvedObject.name=grows"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(evs.Items).To(ContainElement(And(HaveField("Type", corev1.EventTypeWarning), HaveField("Reason", "VolumeResizeFailed"),
				HaveField("Message", And(HavePrefix("In cluster "+s2.Name+": "), ContainSubstring("largest volume"))))))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

		// A shrink below the size it has is the primary's own API server's to refuse, at once.
		_, err := bed.Primary.Clientset.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, "grows", types.MergePatchType,
			[]byte(`{"spec":{"resources":{"requests":{"storage":"1Gi"}}}}`), metav1.PatchOptions{})
		Expect(err).To(MatchError(ContainSubstring("status.capacity")), "a shrink below the claim's 2Gi")

		// Asking less, but more than it has, recovers: the real claim is asked for 3Gi and grows.
		grow(ctx, "grows", "3Gi")
		Eventually(func(g Gomega) {
			sized(g, "3Gi")
			real, err := s2.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "grows", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(real.Spec.Resources.Requests.Storage().String()).To(Equal("3Gi"))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		Expect(delegate(Default).UID).To(Equal(before.UID))
	}, SpecTimeout(4*time.Minute))
})
