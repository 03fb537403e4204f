package replicator_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/integration/clusterenv"
)

// as is a client of the primary that acts as user (impersonated by the suite's admin): the API
// server sends the webhook that user's name and groups.
func as(user string) client.Client {
	cfg := rest.CopyConfig(primary.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: clusterenv.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// grant binds a user to rules, cluster-wide (namespace "") or in one namespace.
func grant(ctx SpecContext, user, namespace, name string, rules ...rbacv1.PolicyRule) {
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	if namespace == "" {
		Expect(primary.Client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules})).To(Succeed())
		Expect(primary.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}})).To(Succeed())
		return
	}
	Expect(primary.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Rules: rules})).To(Succeed())
	Expect(primary.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}})).To(Succeed())
}

var _ = Describe("a Replicator's author", func() {
	It("is refused, naming the missing right, a Replicator that writes where they may not; with the rights, accepted", func(ctx SpecContext) {
		const user, ns = "replicator-author", "author-target"
		Expect(primary.Namespace(ctx, ns, map[string]string{flotillav1.LabelReplicationAllowed: "true"})).To(Succeed())
		grant(ctx, user, "", "replicator-author", rbacv1.PolicyRule{APIGroups: []string{flotillav1.GroupVersion.Group},
			Resources: []string{"replicators"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}})
		alice := as(user)

		rep := plumberSample()
		rep.Name, rep.Spec.ReplicationNamespace, rep.Spec.IngressSecureEnabled = "author-check", ns, false
		rep.Spec.IngressName, rep.Spec.IngressSpec = "", nil
		err := alice.Create(ctx, rep.DeepCopy())
		Expect(err).To(HaveOccurred(), "a user with no right in %s made a Replicator that writes there", ns)
		Expect(err.Error()).To(ContainSubstring(`user "replicator-author" may not create configmaps in namespace author-target`))
		Eventually(func(g Gomega) {
			g.Expect(primary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nginx"}, &appsv1.Deployment{})).To(
				MatchError(ContainSubstring("not found")), "nothing was written")
		}).WithContext(ctx).WithTimeout(2 * time.Second).Should(Succeed())

		missingNS := rep.DeepCopy()
		missingNS.Name, missingNS.Spec.ReplicationNamespace = "author-new-ns", "author-nowhere"
		err = alice.Create(ctx, missingNS)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("may not create namespaces author-nowhere"))

		// Rights on ConfigMaps and Services, none on Deployments: the Deployment is named.
		write := []string{"create", "patch", "delete"}
		grant(ctx, user, ns, "replicator-author-core", rbacv1.PolicyRule{APIGroups: []string{""},
			Resources: []string{"configmaps", "services"}, Verbs: write})
		err = alice.Create(ctx, rep.DeepCopy())
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("may not create deployments.apps in namespace author-target"))
		Expect(err.Error()).NotTo(ContainSubstring("configmaps"), "a right held is not named")

		grant(ctx, user, ns, "replicator-author-apps", rbacv1.PolicyRule{APIGroups: []string{"apps"},
			Resources: []string{"deployments"}, Verbs: write})
		accepted := rep.DeepCopy()
		Expect(alice.Create(ctx, accepted)).To(Succeed(), "with the rights it writes, the author's Replicator is accepted")

		// UPDATE is checked too: a DaemonSet with hostPath the author may not create is refused.
		raw := []byte(`{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"node-agent"},"spec":{"selector":{"matchLabels":{"a":"b"}},` +
			`"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"busybox"}],"volumes":[{"name":"root","hostPath":{"path":"/"}}]}}}}`)
		var ds flotillav1.Manifest
		Expect(ds.UnmarshalJSON(raw)).To(Succeed())
		Eventually(func(g Gomega) {
			var live flotillav1.Replicator
			g.Expect(alice.Get(ctx, client.ObjectKeyFromObject(accepted), &live)).To(Succeed())
			live.Spec.Resources = append(live.Spec.Resources, ds)
			err := alice.Update(ctx, &live)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring("may not create daemonsets.apps in namespace author-target"))
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		var live flotillav1.Replicator
		Expect(primary.Client.Get(ctx, client.ObjectKeyFromObject(accepted), &live)).To(Succeed())
		Expect(live.Spec.Resources).To(BeEmpty(), "the refused update changed nothing")

		// The manager's own updates (the finalizer) and its deletion go through whatever the author holds.
		Eventually(func(g Gomega) {
			g.Expect(primary.Client.Get(ctx, client.ObjectKeyFromObject(accepted), &live)).To(Succeed())
			g.Expect(live.Finalizers).To(ContainElement(flotillav1.FinalizerReplicator))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(alice.Delete(ctx, &live)).To(Succeed())
		Eventually(func() error { _, err := replicatorStatus(ctx, live.Name); return err }).WithContext(ctx).
			WithTimeout(30 * time.Second).Should(MatchError(ContainSubstring("not found")))
		Expect(primary.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})).To(Succeed())
	}, SpecTimeout(2*time.Minute))
})
