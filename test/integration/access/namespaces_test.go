package access_test

import (
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/pkg/access"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/test/integration/clusterenv"
)

// notAllowed is what the secondary answers the joined identity outside its namespace allow-list.
const notAllowed = "may use only the namespaces"

var _ = Describe("the namespace allow-list of join (--namespaces)", Ordered, func() {
	// A primary of its own, joined with an allow-list: its policy and identity are not the suite's.
	var (
		allowNames access.Names
		asAllowed  client.Client
	)
	// apply creates or updates what join applies, as join does (a policy's spec replaced).
	apply := func(ctx SpecContext, allow access.Namespaces) {
		for _, o := range access.Objects(allowNames, "east", access.Limits{Namespaces: allow}) {
			live := o.DeepCopyObject().(client.Object)
			err := secondary.Client.Get(ctx, client.ObjectKeyFromObject(o), live)
			if err != nil {
				Expect(client.IgnoreNotFound(err)).To(Succeed())
				Expect(secondary.Client.Create(ctx, o)).To(Succeed(), "%T %s", o, o.GetName())
				continue
			}
			if p, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok {
				lp := live.(*admissionregistrationv1.ValidatingAdmissionPolicy)
				lp.Spec = p.Spec
				Expect(secondary.Client.Update(ctx, lp)).To(Succeed())
			}
		}
	}
	labelled := func(name string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			flotillav1.LabelManagedBy: allowNames.PrimaryID, flotillav1.LabelPrimary: allowNames.PrimaryID}}}
	}
	configMap := func(ns string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "copy",
			Labels: map[string]string{flotillav1.LabelPrimary: allowNames.PrimaryID}}}
	}

	BeforeAll(func(ctx SpecContext) {
		allowNames = access.NamesFor("fedcba9876543210-allowlist")
		apply(ctx, access.Namespaces{"web", "team-*"})
		cfg := rest.CopyConfig(secondary.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: allowNames.Username(),
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + flotillav1.SystemNamespace, "system:authenticated"}}
		var err error
		asAllowed, err = client.New(cfg, client.Options{Scheme: clusterenv.Scheme})
		Expect(err).NotTo(HaveOccurred())
		// An admin opened "tools" to this primary by its label; its name is not on the list.
		Expect(secondary.Client.Create(ctx, labelled("tools"))).To(Succeed())
	})

	// enforced waits until the API server enforces the policy as applied: a probe is refused.
	enforced := func(ctx SpecContext, probe string) {
		Eventually(func() error {
			err := asAllowed.Create(ctx, labelled(probe))
			if err == nil {
				Expect(secondary.Client.Delete(ctx, labelled(probe))).To(Succeed())
			}
			return err
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(MatchError(ContainSubstring(notAllowed)))
	}

	It("refuses creating a namespace whose name is not on the list (cert-manager first in a fresh secondary), and writing in one", func(ctx SpecContext) {
		enforced(ctx, "probe")
		Expect(asAllowed.Create(ctx, labelled("cert-manager"))).To(MatchError(And(
			ContainSubstring(notAllowed), ContainSubstring("web, team-*"), ContainSubstring("cert-manager"))))
		for _, name := range []string{"webby", "team", "xteam-a"} {
			Expect(asAllowed.Create(ctx, labelled(name))).To(MatchError(ContainSubstring(notAllowed)), "namespace %s", name)
		}
		Expect(asAllowed.Create(ctx, configMap("tools"))).To(MatchError(ContainSubstring(notAllowed)),
			"a namespace labelled for it by an admin, whose name is not on the list")
		// The controls: a listed name and a name of a listed prefix.
		for _, name := range []string{"web", "team-a"} {
			Expect(asAllowed.Create(ctx, labelled(name))).To(Succeed(), "namespace %s", name)
			Expect(asAllowed.Create(ctx, configMap(name))).To(Succeed(), "a ConfigMap in %s", name)
		}
	})

	It("names the allow-list in the error EnsureManagedNamespace gives the proxy and Replicator reconcilers", func(ctx SpecContext) {
		_, err := clusters.EnsureManagedNamespace(ctx, asAllowed, "east", "cert-manager", allowNames.PrimaryID, nil, nil)
		var notManaged *clusters.NamespaceNotManagedError
		Expect(errors.As(err, &notManaged)).To(BeTrue(), "a refusal for good, not something to wait for: %v", err)
		Expect(err).To(MatchError(And(ContainSubstring(notAllowed), ContainSubstring("web, team-*"),
			ContainSubstring("cert-manager"), ContainSubstring("--namespaces"))))
	})

	It("takes another list when join runs again; what it made outside the new list it may still delete", func(ctx SpecContext) {
		apply(ctx, access.Namespaces{"web"})
		enforced(ctx, "team-probe")
		Expect(asAllowed.Create(ctx, labelled("team-b"))).To(MatchError(ContainSubstring(notAllowed)))
		Expect(asAllowed.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "more"}})).
			To(MatchError(ContainSubstring(notAllowed)))
		Expect(asAllowed.Delete(ctx, configMap("team-a"))).To(Succeed(), "taking away what it made there")
		Expect(asAllowed.Delete(ctx, labelled("team-a"))).To(Succeed())
		Expect(asAllowed.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "more"}})).To(Succeed())
	})

	It("allows every name the fence does not forbid without a list (the suite's primary)", func(ctx SpecContext) {
		_, err := asFlotilla.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "any-name",
			Labels: map[string]string{flotillav1.LabelManagedBy: names.PrimaryID}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	})
})
