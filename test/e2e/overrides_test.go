package e2e

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// Every cluster a little different: Overrides change, per cluster, the delegates of elected pods
// and the copies of Replicators.
var _ = Describe("per-cluster overrides", Ordered, func() {
	const ns, copies = "overridden", "overridden-copies"
	primary := func() client.Client { return clientOf(bed.Primary) }

	BeforeAll(func(ctx SpecContext) {
		joinBothSecondaries(ctx)
		enabledNamespace(ctx, ns)
	})

	It("rewrites an elected pod's registry in one cluster only, shows it with render, and new pods use the original once the override goes", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		regional := &flotillav1.Override{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "regional-registry"}, Spec: flotillav1.OverrideSpec{
			Rules: []flotillav1.OverrideRule{{Name: "mirror", Targets: []flotillav1.OverrideTarget{{Kind: "Pod",
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
				Clusters: flotillav1.OverrideClusters{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{flotillav1.LabelCluster: s2.Name}}},
				Image:    &flotillav1.ImageOverride{Registry: "mirror.example.com"}}}}}
		Expect(primary().Create(ctx, regional)).To(Succeed())
		elected := func(name, cluster string) {
			_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"},
				Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: cluster}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}}}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) {
				_ = bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})
			})
		}
		imageIn := func(g Gomega, name string, inS2 bool) (string, string) {
			c := s1
			if inS2 {
				c = s2
			}
			d, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			return d.Spec.Containers[0].Image, d.Annotations[flotillav1.AnnotationOverrides]
		}
		elected("web-a", s1.Name)
		elected("web-b", s2.Name)
		Eventually(func(g Gomega) {
			img, rules := imageIn(g, "web-a", false)
			g.Expect(img).To(Equal("registry.k8s.io/pause:3.10"))
			g.Expect(rules).To(BeEmpty())
			img, rules = imageIn(g, "web-b", true)
			g.Expect(img).To(Equal("mirror.example.com/pause:3.10"))
			g.Expect(rules).To(Equal("Override " + ns + "/regional-registry rule mirror"))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		// The proxy keeps its own image: the override is the cluster's, not a change to carry back.
		Consistently(func(g Gomega) {
			img, _ := imageIn(g, "web-b", true)
			g.Expect(img).To(Equal("mirror.example.com/pause:3.10"))
		}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("render shows both")
		out, err := flotillactl(ctx, "render", "pod", ns+"/web-b", "--cluster", s2.Name)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(And(ContainSubstring("Override "+ns+"/regional-registry rule mirror"), ContainSubstring("image: mirror.example.com/pause:3.10")))
		out, err = flotillactl(ctx, "render", "pod", ns+"/web-b", "--cluster", s1.Name)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(And(ContainSubstring("no Override rule applies"), ContainSubstring("image: registry.k8s.io/pause:3.10")))

		By("the override removed: a new pod there runs the original")
		Expect(primary().Delete(ctx, regional)).To(Succeed())
		elected("web-c", s2.Name)
		Eventually(func(g Gomega) {
			img, rules := imageIn(g, "web-c", true)
			g.Expect(img).To(Equal("registry.k8s.io/pause:3.10"))
			g.Expect(rules).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
	})

	It("gives a replicated Deployment its replicas and env per cluster, repairs drift back to the overridden values, and leaves a copy untouched when a rule cannot apply", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		rep := &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: "overridden"}, Spec: flotillav1.ReplicatorSpec{
			ReplicationNamespace: copies, TargetCluster: []string{s1.Name, s2.Name},
			DeploymentName: "web", DeploymentSpec: &flotillav1.ReplicatedDeploymentSpec{Replicas: ptr.To[int32](2), Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}}}}},
			ConfigMapName: "settings", ConfigMapData: map[string]string{"mode": "plain"},
		}}
		Expect(primary().Create(ctx, rep)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = primary().Delete(ctx, rep) })
		per := func(cluster, region string, replicas int32) flotillav1.OverrideRule {
			return flotillav1.OverrideRule{Name: cluster, Targets: []flotillav1.OverrideTarget{{Kind: "Deployment", Names: []string{"web"}}},
				Clusters: flotillav1.OverrideClusters{Names: []string{cluster}}, Replicas: ptr.To(replicas),
				Env: []flotillav1.EnvOverride{{Op: "Replace", Name: "REGION", Value: region}}}
		}
		sizes := &flotillav1.Override{ObjectMeta: metav1.ObjectMeta{Namespace: copies, Name: "sizes"}, Spec: flotillav1.OverrideSpec{
			Rules: []flotillav1.OverrideRule{per(s1.Name, "big", 3), per(s2.Name, "edge", 1)}}}
		// The namespace is the Replicator's to create: the Override follows it there.
		Eventually(func() error { return primary().Create(ctx, sizes) }).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		copyOf := func(g Gomega, c client.Client) (int32, string) {
			var d appsv1.Deployment
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: copies, Name: "web"}, &d)).To(Succeed())
			env := ""
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				if e.Name == "REGION" {
					env = e.Value
				}
			}
			return ptr.Deref(d.Spec.Replicas, 0), env
		}
		Eventually(func(g Gomega) {
			n, env := copyOf(g, clientOf(s1))
			g.Expect(n).To(Equal(int32(3)))
			g.Expect(env).To(Equal("big"))
			n, env = copyOf(g, clientOf(s2))
			g.Expect(n).To(Equal(int32(1)))
			g.Expect(env).To(Equal("edge"))
			n, env = copyOf(g, primary())
			g.Expect(n).To(Equal(int32(2)), "the primary's is the Replicator's own")
			g.Expect(env).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("render shows what each secondary gets, each copy with the rules that changed it")
		out, err := flotillactl(ctx, "render", "replicator", rep.Name, "--cluster", s2.Name)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(And(ContainSubstring("# Deployment web, changed by: Override "+copies+"/sizes rule "+s2.Name), ContainSubstring("replicas: 1"),
			ContainSubstring("value: edge"), ContainSubstring("# ConfigMap settings: no Override rule applies")))

		By("drift in secondary2 is repaired back to the overridden value")
		Expect(clientOf(s2).Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: copies, Name: "web"}},
			client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":5}}`)))).To(Succeed())
		Eventually(func(g Gomega) {
			n, _ := copyOf(g, clientOf(s2))
			g.Expect(n).To(Equal(int32(1)))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("a JSON patch whose path does not exist: the Replicator says so, secondary1's copies untouched")
		Expect(primary().Create(ctx, &flotillav1.Override{ObjectMeta: metav1.ObjectMeta{Namespace: copies, Name: "broken"}, Spec: flotillav1.OverrideSpec{
			Rules: []flotillav1.OverrideRule{{Name: "no-such-path", Targets: []flotillav1.OverrideTarget{{Kind: "ConfigMap"}},
				Clusters:  flotillav1.OverrideClusters{Names: []string{s1.Name}},
				JSONPatch: []flotillav1.JSONPatchOperation{{Op: "replace", Path: "/data/nothing", Value: &apiextensionsv1.JSON{Raw: []byte(`"x"`)}}}}}}})).To(Succeed())
		Expect(primary().Patch(ctx, &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: rep.Name}},
			client.RawPatch(types.MergePatchType, []byte(`{"spec":{"configMapData":{"mode":"changed"}}}`)))).To(Succeed())
		Eventually(func(g Gomega) {
			st, err := replicatorStatus(ctx, rep.Name)
			g.Expect(err).NotTo(HaveOccurred())
			var msg string
			for _, c := range st.Status.Clusters {
				if c.Name == s1.Name {
					msg = c.Message
				}
			}
			g.Expect(msg).To(ContainSubstring("Override " + copies + "/broken rule no-such-path cannot apply"))
			var cm corev1.ConfigMap
			g.Expect(clientOf(s2).Get(ctx, client.ObjectKey{Namespace: copies, Name: "settings"}, &cm)).To(Succeed())
			g.Expect(cm.Data).To(HaveKeyWithValue("mode", "changed"), "secondary2 has no broken rule")
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		var cm corev1.ConfigMap
		Expect(clientOf(s1).Get(ctx, client.ObjectKey{Namespace: copies, Name: "settings"}, &cm)).To(Succeed())
		Expect(cm.Data).To(HaveKeyWithValue("mode", "plain"), "nothing half-changed in secondary1")
		events, err := bed.Primary.Clientset.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + rep.Name})
		Expect(err).NotTo(HaveOccurred())
		Expect(events.Items).To(ContainElement(HaveField("Reason", flotillav1.ReasonOverrideFailed)))
		Eventually(func(g Gomega) {
			var broken flotillav1.Override
			g.Expect(primary().Get(ctx, client.ObjectKey{Namespace: copies, Name: "broken"}, &broken)).To(Succeed())
			c := meta.FindStatusCondition(broken.Status.Conditions, flotillav1.ConditionApplied)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("Rule no-such-path cannot apply to Replicator overridden for cluster " + s1.Name))
		}).WithContext(ctx).WithTimeout(30*time.Second).WithPolling(time.Second).Should(Succeed(), "the override says so too")
	})
})

var _ = Describe("per-cluster overrides, written by a tenant", func() {
	It("refuses a tenant's Override that adds a hostPath volume, naming the fence, and one changing a kind its author may not write, naming the right", func(ctx SpecContext) {
		const ns = "overrides-tenant"
		enabledNamespace(ctx, ns)
		admin := clientOf(bed.Primary)
		// The tenant may write pods and Overrides there, not Deployments.
		Expect(admin.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pods-and-overrides"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "update"}},
			{APIGroups: []string{flotillav1.GroupVersion.Group}, Resources: []string{"overrides"}, Verbs: []string{"create", "update", "get"}}}})).To(Succeed())
		Expect(admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pods-and-overrides"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"}}})).To(Succeed())
		cfg := rest.CopyConfig(bed.Primary.RESTConfig)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "tenant", Groups: []string{"system:authenticated"}}
		tenant, err := client.New(cfg, client.Options{Scheme: e2eScheme})
		Expect(err).NotTo(HaveOccurred())
		override := func(name string, rule flotillav1.OverrideRule) *flotillav1.Override {
			return &flotillav1.Override{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: flotillav1.OverrideSpec{Rules: []flotillav1.OverrideRule{rule}}}
		}
		rootfs := override("rootfs", flotillav1.OverrideRule{Name: "mount-root", Targets: []flotillav1.OverrideTarget{{Kind: "Pod"}},
			JSONPatch: []flotillav1.JSONPatchOperation{{Op: "add", Path: "/spec/volumes/-",
				Value: &apiextensionsv1.JSON{Raw: []byte(`{"name":"root","hostPath":{"path":"/"}}`)}}}})
		Expect(tenant.Create(ctx, rootfs)).To(MatchError(And(ContainSubstring("rule mount-root"), ContainSubstring("writes hostPath, which the fence of every secondary keeps out"))))
		sizes := override("sizes", flotillav1.OverrideRule{Name: "small", Targets: []flotillav1.OverrideTarget{{Kind: "Deployment"}}, Replicas: ptr.To[int32](1)})
		Expect(tenant.Create(ctx, sizes)).To(MatchError(ContainSubstring(`user "tenant" may not create deployments.apps in namespace ` + ns)))
		env := override("env", flotillav1.OverrideRule{Name: "region", Targets: []flotillav1.OverrideTarget{{Kind: "Pod"}},
			Env: []flotillav1.EnvOverride{{Op: "Replace", Name: "REGION", Value: "eu"}}})
		Expect(tenant.Create(ctx, env)).To(Succeed(), "what the tenant may write")
	})
})

// A regional registry on real nodes: secondary2's node has the application image under a
// mirror's name only it serves (as a region's registry mirror would); an Override rewrites the
// registry for secondary2, and its delegates run from that name while secondary1's run the
// original (which its node alone knows: a rewrite there would not start).
var _ = Describe("per-cluster overrides on real nodes", Ordered, Label("real-nodes"), func() {
	const ns, mirror = "mirrored", "mirror.testbed.local"
	mirrored := mirror + "/" + strings.TrimPrefix(testbed.TestAppImage, "testbed.local/")
	primary := func() client.Client { return clientOf(bed.Primary) }

	BeforeAll(func(ctx SpecContext) {
		requireSecondaryRealNodes()
		joinBothSecondaries(ctx)
		importAppImage(ctx, false)
		enabledNamespace(ctx, ns)
		s2 := bed.Secondaries[1]
		Expect(s2.RealNode.TagImage(ctx, testbed.TestAppImage, mirrored)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(s2.RealNode.UntagImage(ctx, mirrored)).To(Succeed()) })
	})

	It("runs an elected Deployment's delegates in secondary2 from the regional registry's name, in secondary1 from the original, and a new pod there from the original once the override goes", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		regional := &flotillav1.Override{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "regional-registry"}, Spec: flotillav1.OverrideSpec{
			Rules: []flotillav1.OverrideRule{{Name: "mirror", Targets: []flotillav1.OverrideTarget{{Kind: "Pod",
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "mirrored"}}}},
				Clusters: flotillav1.OverrideClusters{Names: []string{s2.Name}},
				Image:    &flotillav1.ImageOverride{Registry: mirror}}}}}
		Expect(primary().Create(ctx, regional)).To(Succeed())
		labels := map[string]string{"app": "mirrored"}
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mirrored"}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "mirrored", "tier": "mirrored"}, Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
				Spec: onRealNode(appContainer("web", nil))}}}
		Expect(primary().Create(ctx, dep)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = primary().Delete(ctx, dep) })

		// Each proxy Ready (its real container up) and its delegate's image as its cluster gets it.
		runningFrom := func(g Gomega, want map[string]string) {
			proxies, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=mirrored"})
			g.Expect(err).NotTo(HaveOccurred())
			byCluster := map[string]string{}
			for i := range proxies.Items {
				p := &proxies.Items[i]
				if p.DeletionTimestamp != nil {
					continue
				}
				g.Expect(podReady(p)).To(BeTrue(), "proxy %s: %s %s", p.Name, p.Status.Phase, p.Status.Message)
				cluster, _ := flotillav1.ClusterOfNode(p.Spec.NodeName)
				c := s1
				if cluster == s2.Name {
					c = s2
				}
				d, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				byCluster[cluster] = d.Spec.Containers[0].Image
				g.Expect(p.Spec.Containers[0].Image).To(Equal(testbed.TestAppImage), "the proxy keeps the primary's image")
			}
			g.Expect(byCluster).To(Equal(want))
		}
		Eventually(func(g Gomega) {
			runningFrom(g, map[string]string{s1.Name: testbed.TestAppImage, s2.Name: mirrored})
		}).WithContext(ctx).WithTimeout(120 * time.Second).WithPolling(2 * time.Second).Should(Succeed())

		By("the override gone, a new pod in secondary2 runs the original name there")
		Expect(primary().Delete(ctx, regional)).To(Succeed())
		after := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mirrored-after", Labels: map[string]string{"tier": "mirrored"},
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s2.Name}}, Spec: onRealNode(appContainer("web", nil))}
		Expect(primary().Create(ctx, after)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = primary().Delete(ctx, after) })
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, after.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(podReady(p)).To(BeTrue(), "proxy %s: %s %s", p.Name, p.Status.Phase, p.Status.Message)
			d, err := s2.Clientset.CoreV1().Pods(ns).Get(ctx, after.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Spec.Containers[0].Image).To(Equal(testbed.TestAppImage))
			g.Expect(d.Annotations).NotTo(HaveKey(flotillav1.AnnotationOverrides))
		}).WithContext(ctx).WithTimeout(120 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
	})
})
