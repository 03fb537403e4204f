// Package access_test is the integration suite of the fence `flotillactl cluster join` installs
// in a secondary (pkg/access): the RBAC and the ValidatingAdmissionPolicy, applied to a real API
// server and exercised as the joined identity (impersonation).
package access_test

import (
	"encoding/base64"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/flotilla-dev/flotilla/pkg/access"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/integration/clusterenv"
)

// exposure is what the secondary's admin lets this primary expose there, at join.
var exposure = access.Exposure{IngressHosts: []string{"shop.example.com", "*.eu.example.com"}, ServiceTypes: []corev1.ServiceType{corev1.ServiceTypeNodePort}}

var (
	secondary *clusterenv.Cluster
	names     access.Names
	// asFlotilla acts as the joined identity.
	asFlotilla kubernetes.Interface
)

func TestAccess(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "access integration")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	var err error
	secondary, err = clusterenv.Start("secondary")
	Expect(err).NotTo(HaveOccurred())
	names = access.NamesFor("0123456789abcdef-primary")
	for _, o := range access.Objects(names, "east", access.Limits{Exposure: exposure}) {
		Expect(secondary.Client.Create(ctx, o)).To(Succeed(), "%T %s", o, o.GetName())
	}
	cfg := rest.CopyConfig(secondary.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: names.Username(),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + flotillav1.SystemNamespace, "system:authenticated"}}
	asFlotilla, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	for name, labels := range map[string]map[string]string{
		"unmanaged": nil, "managed": {flotillav1.LabelManagedBy: names.PrimaryID}, "others": {flotillav1.LabelManagedBy: "another-primary"},
	} {
		Expect(secondary.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})).To(Succeed())
	}
	// The policy is enforced once the API server has compiled it.
	Eventually(func() error {
		_, err := asFlotilla.CoreV1().ConfigMaps("unmanaged").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{})
		if err == nil {
			_ = secondary.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "unmanaged", Name: "probe"}})
		}
		return err
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(MatchError(ContainSubstring("may write only in namespaces labelled")))
}, NodeTimeout(2*time.Minute))

var _ = AfterSuite(func() { Expect(secondary.Stop()).To(Succeed()) })

const refused = "may write only in namespaces labelled " + flotillav1.LabelManagedBy

var _ = Describe("the fence in a secondary", func() {
	It("refuses the joined identity labelling a namespace it does not manage, taking another primary's, or deleting either", func(ctx SpecContext) {
		for _, name := range []string{"unmanaged", "others"} {
			var ns corev1.Namespace
			Expect(secondary.Client.Get(ctx, client.ObjectKey{Name: name}, &ns)).To(Succeed())
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels[flotillav1.LabelManagedBy] = names.PrimaryID
			_, err := asFlotilla.CoreV1().Namespaces().Update(ctx, &ns, metav1.UpdateOptions{})
			Expect(err).To(MatchError(ContainSubstring(refused)), "labelling %s", name)
			err = asFlotilla.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
			Expect(err).To(MatchError(ContainSubstring(refused)), "deleting %s", name)
		}
		// The controls: its own namespace it may change and delete.
		var ns corev1.Namespace
		Expect(secondary.Client.Get(ctx, client.ObjectKey{Name: "managed"}, &ns)).To(Succeed())
		ns.Annotations = map[string]string{"touched": "yes"}
		_, err := asFlotilla.CoreV1().Namespaces().Update(ctx, &ns, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = asFlotilla.CoreV1().ConfigMaps("managed").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ok"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	})

	It("refuses exec, attach and port-forward outside managed namespaces (CONNECT requests)", func(ctx SpecContext) {
		for _, sub := range []string{"exec", "attach", "portforward"} {
			err := asFlotilla.CoreV1().RESTClient().Post().Namespace("kube-system").Resource("pods").Name("kube-apiserver").
				SubResource(sub).Param("command", "true").Param("stdout", "true").Do(ctx).Error()
			Expect(err).To(MatchError(ContainSubstring(refused)), "%s in kube-system", sub)
			err = asFlotilla.CoreV1().RESTClient().Post().Namespace("unmanaged").Resource("pods").Name("app").
				SubResource(sub).Param("command", "true").Param("stdout", "true").Do(ctx).Error()
			Expect(err).To(MatchError(ContainSubstring(refused)), "%s in an unmanaged namespace", sub)
		}
		// In a managed namespace the fence lets it through (the pod does not exist: NotFound, not refused).
		err := asFlotilla.CoreV1().RESTClient().Post().Namespace("managed").Resource("pods").Name("app").
			SubResource("exec").Param("command", "true").Param("stdout", "true").Do(ctx).Error()
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).NotTo(ContainSubstring(refused))
	})
	It("keeps a delegate's flotilla.dev/* labels and annotations the joined identity's: nobody else relabels it out of the primary's watch, or creates a pod as its delegate", func(ctx SpecContext) {
		delegate := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "managed", Name: "db-0",
			Labels:      map[string]string{flotillav1.LabelPrimary: names.PrimaryID, "app": "db"},
			Annotations: map[string]string{flotillav1.AnnotationProxyUID: "proxy-uid"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		_, err := asFlotilla.CoreV1().Pods("managed").Create(ctx, delegate, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		edit := func(c client.Client, mutate func(*corev1.Pod)) error {
			var p corev1.Pod
			Expect(secondary.Client.Get(ctx, client.ObjectKeyFromObject(delegate), &p)).To(Succeed())
			base := p.DeepCopy()
			mutate(&p)
			return c.Patch(ctx, &p, client.MergeFrom(base))
		}
		const fenced = "are changed by Flotilla only"
		admin := secondary.Client // the secondary's cluster admin is refused too
		Eventually(func() error {
			return edit(admin, func(p *corev1.Pod) { delete(p.Labels, flotillav1.LabelPrimary) })
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(MatchError(ContainSubstring(fenced)), "the label removed")
		Expect(edit(admin, func(p *corev1.Pod) { p.Labels[flotillav1.LabelPrimary] = "another" })).To(MatchError(ContainSubstring(fenced)))
		Expect(edit(admin, func(p *corev1.Pod) { p.Annotations[flotillav1.AnnotationProxyUID] = "other" })).To(MatchError(ContainSubstring(fenced)))
		Expect(edit(admin, func(p *corev1.Pod) { p.Labels["flotilla.dev/extra"] = "x" })).To(MatchError(ContainSubstring(fenced)))
		// Nobody else creates a pod as this primary's delegate (the primary would adopt it).
		forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "managed", Name: "db-1",
			Labels:      map[string]string{flotillav1.LabelPrimary: names.PrimaryID},
			Annotations: map[string]string{flotillav1.AnnotationProxyUID: "another-proxy-uid"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		Expect(admin.Create(ctx, forged)).To(MatchError(ContainSubstring("only Flotilla makes the delegates of that primary")))
		// The controls: the user's own labels stay the user's; the joined identity changes its own.
		Expect(edit(admin, func(p *corev1.Pod) { p.Labels["app"] = "db2" })).To(Succeed())
		Expect(admin.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "managed", Name: "theirs",
			Labels: map[string]string{flotillav1.LabelPrimary: "another-primary"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}})).To(Succeed(), "another primary's label is not this one's to guard")
		cfg := rest.CopyConfig(secondary.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: names.Username(),
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + flotillav1.SystemNamespace, "system:authenticated"}}
		flotilla, err := client.New(cfg, client.Options{Scheme: clusterenv.Scheme})
		Expect(err).NotTo(HaveOccurred())
		Expect(edit(flotilla, func(p *corev1.Pod) { p.Annotations["flotilla.dev/note"] = "mine" })).To(Succeed())
		Expect(secondary.Client.Delete(ctx, delegate)).To(Succeed())
	})
	It("lets the joined identity only tighten a managed namespace's Pod Security levels, never loosen or remove one", func(ctx SpecContext) {
		Expect(secondary.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "psa-fenced", Labels: map[string]string{
			flotillav1.LabelManagedBy: names.PrimaryID, "pod-security.kubernetes.io/enforce": "baseline"}}})).To(Succeed())
		relabel := func(value string) error {
			ns, err := asFlotilla.CoreV1().Namespaces().Get(ctx, "psa-fenced", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			if value == "" {
				delete(ns.Labels, "pod-security.kubernetes.io/enforce")
			} else {
				ns.Labels["pod-security.kubernetes.io/enforce"] = value
			}
			_, err = asFlotilla.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
			return err
		}
		const loosen = "may only tighten the Pod Security levels"
		Eventually(func() error { return relabel("privileged") }).WithContext(ctx).WithTimeout(30 * time.Second).Should(MatchError(ContainSubstring(loosen)))
		Expect(relabel("")).To(MatchError(ContainSubstring(loosen)), "removing the level")
		Expect(relabel("restricted")).To(Succeed(), "tightening")
		Expect(relabel("baseline")).To(MatchError(ContainSubstring(loosen)))
	})
	It("lets the joined identity expose only the Ingress hosts and Service types join allowed, and no Ingress snippet", func(ctx SpecContext) {
		ingress := func(name string, annotations map[string]string, hosts ...string) error {
			ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "managed", Name: name, Annotations: annotations}}
			for _, h := range hosts {
				ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: h})
			}
			_, err := asFlotilla.NetworkingV1().Ingresses("managed").Create(ctx, ing, metav1.CreateOptions{})
			return err
		}
		service := func(name string, t corev1.ServiceType) error {
			_, err := asFlotilla.CoreV1().Services("managed").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.ServiceSpec{Type: t, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
			return err
		}
		const hostRefused, typeRefused, snippetRefused = "only the Ingress hosts join allowed", "only Services of type ClusterIP", "snippet annotation"
		Eventually(func() error { return ingress("bank", nil, "bank.example.com") }).WithContext(ctx).WithTimeout(30*time.Second).
			Should(MatchError(ContainSubstring(hostRefused)), "a host the admin did not allow")
		Expect(ingress("deep", nil, "a.b.eu.example.com")).To(MatchError(ContainSubstring(hostRefused)), "*.eu.example.com is one label")
		Expect(ingress("any", nil, "")).To(MatchError(ContainSubstring(hostRefused)), "a rule for every host")
		Expect(ingress("snippet", map[string]string{"nginx.ingress.kubernetes.io/server-snippet": "location / {}"}, "shop.example.com")).
			To(MatchError(ContainSubstring(snippetRefused)))
		Expect(service("lb", corev1.ServiceTypeLoadBalancer)).To(MatchError(ContainSubstring(typeRefused)))
		// The controls.
		Expect(ingress("shop", nil, "shop.example.com", "web.eu.example.com")).To(Succeed())
		Expect(service("plain", corev1.ServiceTypeClusterIP)).To(Succeed())
		Expect(service("np", corev1.ServiceTypeNodePort)).To(Succeed())
	})
})

var _ = Describe("the fence in a secondary, for Multi-Cluster Services", func() {
	It("lets the joined identity write imports, their EndpointSlices and flotilla-mcs-* Services only in managed namespaces and only of their own shape, change only its own, and write only the status of a user's ServiceExport there", func(ctx SpecContext) {
		cfg := rest.CopyConfig(secondary.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: names.Username(),
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + flotillav1.SystemNamespace, "system:authenticated"}}
		flotilla, err := client.New(cfg, client.Options{Scheme: clusterenv.Scheme})
		Expect(err).NotTo(HaveOccurred())
		mine := map[string]string{flotillav1.LabelPrimary: names.PrimaryID}
		imp := func(ns, name string, labels map[string]string) *mcsv1beta1.ServiceImport {
			return &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
				Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{{Port: 42, Protocol: corev1.ProtocolTCP}}}}
		}
		// As the MCS controller writes them: for the import's flotilla-mcs-* Service, carrying its name.
		slice := func(ns, name, managedBy, service string) *discoveryv1.EndpointSlice {
			return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
				Labels: map[string]string{discoveryv1.LabelManagedBy: managedBy, flotillav1.LabelPrimary: names.PrimaryID,
					discoveryv1.LabelServiceName: service, mcsv1beta1.LabelServiceName: "hello"}}, AddressType: discoveryv1.AddressTypeIPv4}
		}
		svc := func(ns, name string, mut ...func(*corev1.Service)) *corev1.Service {
			s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
				Labels: map[string]string{flotillav1.LabelPrimary: names.PrimaryID, mcsv1beta1.LabelServiceName: "hello"}},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 42}}}}
			for _, m := range mut {
				m(s)
			}
			return s
		}
		const shapeRefused = "writes EndpointSlices only for its flotilla-mcs-* Services"
		// In a managed namespace, as the controller writes them (the first once the policy is compiled).
		Eventually(func() error { return flotilla.Create(ctx, imp("managed", "hello", mine)) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(flotilla.Create(ctx, slice("managed", "hello-abc", "flotilla.dev", "flotilla-mcs-hello"))).To(Succeed())
		Expect(flotilla.Create(ctx, svc("managed", "flotilla-mcs-hello"))).To(Succeed())
		// An EndpointSlice for another Service (kube-proxy would route that Service to it), one
		// without the imported name, or one another controller manages: refused.
		Expect(flotilla.Create(ctx, slice("managed", "web-abc", "flotilla.dev", "web"))).To(MatchError(ContainSubstring(shapeRefused)))
		noName := slice("managed", "hello-noname", "flotilla.dev", "flotilla-mcs-hello")
		delete(noName.Labels, mcsv1beta1.LabelServiceName)
		Expect(flotilla.Create(ctx, noName)).To(MatchError(ContainSubstring(shapeRefused)))
		Expect(flotilla.Create(ctx, slice("managed", "hello-def", "endpointslice-controller.k8s.io", "flotilla-mcs-hello"))).To(MatchError(ContainSubstring(shapeRefused)))
		// A flotilla-mcs-* Service that exposes or selects anything: refused (NodePort is a type join allowed here).
		Expect(flotilla.Create(ctx, svc("managed", "flotilla-mcs-np", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }))).
			To(MatchError(ContainSubstring(shapeRefused)))
		Expect(flotilla.Create(ctx, svc("managed", "flotilla-mcs-sel", func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "db"} }))).
			To(MatchError(ContainSubstring(shapeRefused)))
		Expect(flotilla.Create(ctx, svc("managed", "flotilla-mcs-ext", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.1"} }))).
			To(MatchError(ContainSubstring(shapeRefused)))
		// In a namespace it does not manage, and in the forbidden ones: nothing of it.
		Expect(flotilla.Create(ctx, imp("unmanaged", "hello", mine))).To(MatchError(ContainSubstring(refused)))
		Expect(flotilla.Create(ctx, slice("unmanaged", "hello-abc", "flotilla.dev", "flotilla-mcs-hello"))).To(MatchError(ContainSubstring(refused)))
		Expect(flotilla.Create(ctx, svc("unmanaged", "flotilla-mcs-hello"))).To(MatchError(ContainSubstring(refused)))
		Expect(flotilla.Create(ctx, imp("kube-system", "hello", mine))).To(MatchError(ContainSubstring(refused)))
		Expect(flotilla.Create(ctx, imp(flotillav1.SystemNamespace, "hello", mine))).To(MatchError(ContainSubstring(refused)))
		unmanagedExport := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "unmanaged", Name: "hello"}}
		Expect(secondary.Client.Create(ctx, unmanagedExport)).To(Succeed())
		unmanagedExport.Status.Conditions = []metav1.Condition{{Type: "Valid", Status: metav1.ConditionTrue, Reason: "Valid", Message: "ok", LastTransitionTime: metav1.Now()}}
		Expect(flotilla.Status().Update(ctx, unmanagedExport)).To(MatchError(ContainSubstring(refused)), "the status of an export where it may not write")
		// An import it did not make (another implementation's) it may neither change nor delete.
		theirs := imp("managed", "theirs", nil)
		Expect(secondary.Client.Create(ctx, theirs)).To(Succeed())
		theirs.Labels = mine
		Expect(flotilla.Update(ctx, theirs)).To(MatchError(ContainSubstring(refused)))
		Expect(flotilla.Delete(ctx, imp("managed", "theirs", nil))).To(MatchError(ContainSubstring(refused)))
		Expect(flotilla.Delete(ctx, imp("managed", "hello", nil))).To(Succeed(), "its own it deletes")
		// A user's ServiceExport in a managed namespace: its status yes, its spec no.
		export := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "managed", Name: "hello"}}
		Expect(secondary.Client.Create(ctx, export)).To(Succeed())
		export.Status.Conditions = []metav1.Condition{{Type: "Valid", Status: metav1.ConditionTrue, Reason: "Valid", Message: "ok", LastTransitionTime: metav1.Now()}}
		Expect(flotilla.Status().Update(ctx, export)).To(Succeed())
		export.Spec.ExportedLabels = map[string]string{"taken": "yes"}
		Expect(flotilla.Update(ctx, export)).To(HaveOccurred())
	})

	It("lets the joined identity of a pulled cluster replace its agent's credential, in that one Secret labelled for its primary, and never read it", func(ctx SpecContext) {
		for _, o := range access.AgentObjects(names) {
			Expect(secondary.Client.Create(ctx, o)).To(Succeed(), "%T %s", o, o.GetName())
		}
		agentSecret := func(name, primary string) *corev1.Secret {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: name,
				Labels: map[string]string{flotillav1.LabelPrimary: primary}}, Data: map[string][]byte{"token": []byte("join's")}}
		}
		Expect(secondary.Client.Create(ctx, agentSecret(flotillav1.AgentSecretName, names.PrimaryID))).To(Succeed())
		Expect(secondary.Client.Create(ctx, agentSecret("other", names.PrimaryID))).To(Succeed())
		replace := []byte(`{"data":{"token":"` + base64.StdEncoding.EncodeToString([]byte("the manager's")) + `"}}`)
		secrets := asFlotilla.CoreV1().Secrets(flotillav1.SystemNamespace)
		// RBAC is compiled a moment after the Role is made.
		Eventually(func() error {
			_, err := secrets.Patch(ctx, flotillav1.AgentSecretName, types.MergePatchType, replace, metav1.PatchOptions{})
			return err
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		var got corev1.Secret
		Expect(secondary.Client.Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: flotillav1.AgentSecretName}, &got)).To(Succeed())
		Expect(string(got.Data["token"])).To(Equal("the manager's"))

		_, err := secrets.Get(ctx, flotillav1.AgentSecretName, metav1.GetOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "reading it: %v", err)
		_, err = secrets.Patch(ctx, "other", types.MergePatchType, replace, metav1.PatchOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "another Secret there: %v", err)
		// Taking the label away, or writing the Secret once it is another primary's: the fence.
		unlabel := []byte(`{"metadata":{"labels":{"` + flotillav1.LabelPrimary + `":null}}}`)
		_, err = secrets.Patch(ctx, flotillav1.AgentSecretName, types.MergePatchType, unlabel, metav1.PatchOptions{})
		Expect(err).To(MatchError(ContainSubstring(refused)))
		got.Labels[flotillav1.LabelPrimary] = "another-primary"
		Expect(secondary.Client.Update(ctx, &got)).To(Succeed())
		_, err = secrets.Patch(ctx, flotillav1.AgentSecretName, types.MergePatchType, replace, metav1.PatchOptions{})
		Expect(err).To(MatchError(ContainSubstring(refused)))
	})
})

var _ = Describe("what a secondary lends a primary", Ordered, func() {
	const ns = "lent"
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{flotillav1.LabelPrimary: names.PrimaryID}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	}
	createPod := func(ctx SpecContext, name string) error {
		_, err := asFlotilla.CoreV1().Pods(ns).Create(ctx, pod(name), metav1.CreateOptions{})
		return err
	}

	BeforeAll(func(ctx SpecContext) {
		Expect(secondary.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{flotillav1.LabelManagedBy: names.PrimaryID}}})).To(Succeed())
		Expect(secondary.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}})).To(Succeed())
	})

	It("admits the identity's workloads only where the lender put the quota in force while its allowance exists, everywhere it may write without one; never lets it set that label or write its allowance", func(ctx SpecContext) {
		By("without an allowance: a pod in a managed namespace is admitted (the policy's missing parameter admits)")
		Expect(createPod(ctx, "free")).To(Succeed())

		By("with one: refused in a namespace the lender has not labelled, naming the allowance")
		allowance := &flotillav1.PrimaryAllowance{ObjectMeta: metav1.ObjectMeta{Name: names.PrimaryID},
			Spec: flotillav1.PrimaryAllowanceSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("5")}}}
		Expect(secondary.Client.Create(ctx, allowance)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = secondary.Client.Delete(ctx, allowance) })
		Eventually(func() error { return createPod(ctx, "held") }).WithContext(ctx).WithTimeout(30 * time.Second).
			Should(MatchError(ContainSubstring("its lender has not yet put the quota of namespace " + ns + " in force")))
		// Others' pods there are not the policy's: the quota counts them, the policy lets them be.
		Expect(secondary.Client.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "admins"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}})).To(Succeed())

		By("the identity may not set the label itself, on a namespace it updates or creates")
		managed, err := asFlotilla.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		managed.Labels[flotillav1.LabelAllowance] = names.PrimaryID
		_, err = asFlotilla.CoreV1().Namespaces().Update(ctx, managed, metav1.UpdateOptions{})
		Expect(err).To(MatchError(ContainSubstring("may not set or change the label " + flotillav1.LabelAllowance)))
		_, err = asFlotilla.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "self-lent",
			Labels: map[string]string{flotillav1.LabelManagedBy: names.PrimaryID, flotillav1.LabelAllowance: names.PrimaryID}}}, metav1.CreateOptions{})
		Expect(err).To(MatchError(ContainSubstring("may not set or change the label " + flotillav1.LabelAllowance)))

		By("labelled by the lender (here the admin): admitted")
		Expect(secondary.Client.Get(ctx, client.ObjectKey{Name: ns}, managed)).To(Succeed())
		managed.Labels[flotillav1.LabelAllowance] = names.PrimaryID
		Expect(secondary.Client.Update(ctx, managed)).To(Succeed())
		Eventually(func() error { return createPod(ctx, "lent") }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		By("the identity reads its allowance, never writes or deletes it, and reads no other primary's")
		cfg := rest.CopyConfig(secondary.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: names.Username(),
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + flotillav1.SystemNamespace, "system:authenticated"}}
		asFlotillaCtrl, err := client.New(cfg, client.Options{Scheme: secondary.Client.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		var read flotillav1.PrimaryAllowance
		Expect(asFlotillaCtrl.Get(ctx, client.ObjectKey{Name: names.PrimaryID}, &read)).To(Succeed())
		read.Spec.Hard[corev1.ResourcePods] = resource.MustParse("500")
		Expect(apierrors.IsForbidden(asFlotillaCtrl.Update(ctx, &read))).To(BeTrue())
		Expect(apierrors.IsForbidden(asFlotillaCtrl.Delete(ctx, &read))).To(BeTrue())
		Expect(apierrors.IsForbidden(asFlotillaCtrl.Create(ctx, &flotillav1.PrimaryAllowance{ObjectMeta: metav1.ObjectMeta{Name: "another-primary"},
			Spec: flotillav1.PrimaryAllowanceSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("500")}}}))).To(BeTrue())
		Expect(apierrors.IsForbidden(asFlotillaCtrl.Get(ctx, client.ObjectKey{Name: "another-primary"}, &read))).To(BeTrue())
	})
})
