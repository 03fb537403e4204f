// Package chart_test is the integration suite of the Helm chart: what it renders for every value
// and role (and what its schema refuses), what it installs in a primary, rendered by helm and
// applied to a real API server (the admission policy that keeps proxies Flotilla's own), and its
// CRDs installed, upgraded, kept and taken back by helm itself on an API server of their own.
package chart_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/integration/clusterenv"
)

var primary *clusterenv.Cluster

func TestChart(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "chart integration")
}

// as is a client acting as user.
func as(user string, groups ...string) client.Client {
	cfg := rest.CopyConfig(primary.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := client.New(cfg, client.Options{Scheme: clusterenv.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

const manager = "system:serviceaccount:flotilla-system:flotilla"

var _ = BeforeSuite(func(ctx SpecContext) {
	helmHome = GinkgoT().TempDir()
	var err error
	primary, err = clusterenv.Start("primary")
	Expect(err).NotTo(HaveOccurred())
	Expect(primary.Namespace(ctx, flotillav1.SystemNamespace, nil)).To(Succeed())
	// clusterenv installed the CRDs already.
	// replicator.enabled: the manager's RBAC writes of Replicators, and the policy that narrows them.
	// multiclusterServices.enabled: the manager's writes of imports, and the policy that narrows them.
	for _, o := range render(ctx, "manager.enabled=false", "crds.install=false", "replicator.enabled=true", "multiclusterServices.enabled=true") {
		Expect(primary.Client.Create(ctx, o)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
	}
	Expect(primary.Namespace(ctx, "enabled", map[string]string{flotillav1.LabelEnabled: "true"})).To(Succeed())
	Expect(primary.Namespace(ctx, "plain", nil)).To(Succeed())
	// The policy is enforced once the API server has compiled it.
	Eventually(func() error { return primary.Client.Create(ctx, forged("plain", "probe"), client.DryRunAll) }).
		WithContext(ctx).WithTimeout(30 * time.Second).Should(MatchError(ContainSubstring("was not made by Flotilla")))
}, NodeTimeout(2*time.Minute))

var _ = AfterSuite(func() { Expect(primary.Stop()).To(Succeed()) })

// forged is a pod that claims to be a proxy with host networking and every toleration for its
// delegate, bound to a virtual node, without having been through the webhook.
func forged(namespace, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
		Labels:      map[string]string{flotillav1.LabelProxy: "true"},
		Annotations: map[string]string{flotillav1.AnnotationDelegateConstraints: `{"hostNetwork":true,"tolerations":[{"operator":"Exists"}]}`}},
		Spec: corev1.PodSpec{NodeName: "flotilla-east", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
}

var _ = Describe("the chart's admission policy in the primary", func() {
	It("refuses a forged proxy in an enabled and in an unlabelled namespace, whoever creates it", func(ctx SpecContext) {
		for _, ns := range []string{"enabled", "plain"} {
			err := primary.Client.Create(ctx, forged(ns, "forged"))
			Expect(err).To(MatchError(ContainSubstring("was not made by Flotilla")), "in %s", ns)
			bound := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bound"},
				Spec: corev1.PodSpec{NodeName: "flotilla-east", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
			Expect(primary.Client.Create(ctx, bound)).To(MatchError(ContainSubstring("was not made by Flotilla")), "bound to a virtual node in %s", ns)
		}
		// The controls: an ordinary pod, and a pod the webhook would have handled.
		Expect(primary.Client.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "plain", Name: "ordinary"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}})).To(Succeed())
		made := forged("enabled", "made")
		made.Annotations[flotillav1.AnnotationElect] = ""
		made.Annotations[flotillav1.AnnotationSeal] = "v1.n.sealed-by-the-webhook"
		Expect(primary.Client.Create(ctx, made)).To(Succeed())
	})

	It("refuses the state of a proxy on a pod the webhook skips: labelled flotilla.dev/primary, or without the webhook's seal", func(ctx SpecContext) {
		// The pod a tenant with edit rights created on the demo's bed, and got a delegate
		// mounting the secondary's PVC db-data for: the label made the webhook skip it.
		skipped := forged("enabled", "skipped")
		skipped.Labels[flotillav1.LabelPrimary] = "x"
		skipped.Annotations = map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationDelegateConstraints: "{}",
			flotillav1.AnnotationSeal: "v1.n.copied-from-a-proxy"}
		skipped.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "db-data"}}}}
		// What edit grants on pods (no controller manager here aggregates the edit ClusterRole).
		Expect(primary.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "enabled", Name: "tenant-edit"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "list", "update", "patch", "delete"}}}})).To(Succeed())
		Expect(primary.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "enabled", Name: "tenant-edit"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant-edit"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"}}})).To(Succeed())
		tenant := as("tenant", "system:authenticated")
		// Once the API server's RBAC has seen the binding.
		Eventually(func() error { return tenant.Create(ctx, skipped.DeepCopy()) }).WithContext(ctx).WithTimeout(10 * time.Second).
			Should(MatchError(ContainSubstring("was not made by Flotilla")))
		Expect(primary.Client.Create(ctx, skipped)).To(MatchError(ContainSubstring("was not made by Flotilla")), "cluster admins too")
		// Elected in an enabled namespace but without a seal: the webhook did not make it.
		unsealed := forged("enabled", "unsealed")
		unsealed.Annotations[flotillav1.AnnotationElect] = ""
		Expect(primary.Client.Create(ctx, unsealed)).To(MatchError(ContainSubstring("was not made by Flotilla")))
		// A seal alone is a proxy's state too.
		sealOnly := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "plain", Name: "seal-only",
			Annotations: map[string]string{flotillav1.AnnotationSeal: "v1.n.x"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		Expect(primary.Client.Create(ctx, sealOnly)).To(MatchError(ContainSubstring("was not made by Flotilla")))
	})

	It("lets only the manager change flotilla.dev/* labels and annotations of a pod", func(ctx SpecContext) {
		pod := &corev1.Pod{}
		Expect(primary.Client.Get(ctx, client.ObjectKey{Namespace: "enabled", Name: "made"}, pod)).To(Succeed())
		edit := func(c client.Client, mutate func(*corev1.Pod)) error {
			p := &corev1.Pod{}
			Expect(primary.Client.Get(ctx, client.ObjectKeyFromObject(pod), p)).To(Succeed())
			base := p.DeepCopy()
			mutate(p)
			return c.Patch(ctx, p, client.MergeFrom(base))
		}
		user := primary.Client // an admin (system:masters) is a user like any other here
		Expect(edit(user, func(p *corev1.Pod) {
			p.Annotations[flotillav1.AnnotationDelegateConstraints] = `{"hostNetwork":true}`
		})).To(MatchError(ContainSubstring("set by Flotilla only")))
		Expect(edit(user, func(p *corev1.Pod) { delete(p.Labels, flotillav1.LabelProxy) })).To(MatchError(ContainSubstring("set by Flotilla only")))
		Expect(edit(user, func(p *corev1.Pod) { p.Annotations[flotillav1.AnnotationDelegateIP] = "10.0.0.1" })).To(MatchError(ContainSubstring("set by Flotilla only")))
		Expect(edit(user, func(p *corev1.Pod) { p.Labels["app"] = "mine" })).To(Succeed(), "other labels are the user's")
		Expect(edit(as(manager, "system:serviceaccounts", "system:authenticated"), func(p *corev1.Pod) {
			p.Annotations[flotillav1.AnnotationDelegateIP] = "10.0.0.2"
		})).To(Succeed(), "the manager writes its own annotations")
	})

	It("lets only the manager set or change a claim's flotilla.dev/* annotations (which cluster holds its data)", func(ctx SpecContext) {
		claim := func(annotations map[string]string) *corev1.PersistentVolumeClaim {
			return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "enabled", Name: "data", Annotations: annotations},
				Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(flotillav1.StorageClassRemote),
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		}
		const refused = "set by Flotilla only"
		user := primary.Client
		Expect(user.Create(ctx, claim(map[string]string{flotillav1.AnnotationVolumeCluster: "theirs"}))).To(MatchError(ContainSubstring(refused)))
		Expect(user.Create(ctx, claim(nil))).To(Succeed())
		edit := func(c client.Client, mutate func(*corev1.PersistentVolumeClaim)) error {
			pvc := &corev1.PersistentVolumeClaim{}
			Expect(primary.Client.Get(ctx, client.ObjectKey{Namespace: "enabled", Name: "data"}, pvc)).To(Succeed())
			base := pvc.DeepCopy()
			mutate(pvc)
			return c.Patch(ctx, pvc, client.MergeFrom(base))
		}
		Expect(edit(as(manager, "system:serviceaccounts", "system:authenticated"), func(p *corev1.PersistentVolumeClaim) {
			metav1.SetMetaDataAnnotation(&p.ObjectMeta, flotillav1.AnnotationVolumeCluster, "east")
		})).To(Succeed(), "the manager records the claim's cluster")
		Expect(edit(user, func(p *corev1.PersistentVolumeClaim) { p.Annotations[flotillav1.AnnotationVolumeCluster] = "west" })).To(MatchError(ContainSubstring(refused)))
		Expect(edit(user, func(p *corev1.PersistentVolumeClaim) { delete(p.Annotations, flotillav1.AnnotationVolumeCluster) })).To(MatchError(ContainSubstring(refused)))
		Expect(edit(user, func(p *corev1.PersistentVolumeClaim) { p.Annotations[flotillav1.AnnotationVolumeRetainedIn] = "west" })).To(MatchError(ContainSubstring(refused)))
		Expect(edit(user, func(p *corev1.PersistentVolumeClaim) { p.Annotations["team"] = "shop" })).To(Succeed(), "other annotations are the user's")
	})
})

var _ = Describe("the chart's fence on the manager's nodes and Leases", func() {
	It("lets the manager write only its own virtual nodes and their Leases, never a real node", func(ctx SpecContext) {
		mgr := as(manager, "system:serviceaccounts", "system:authenticated")
		node := func(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
		lease := func(namespace, name string) *coordinationv1.Lease {
			return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
		}
		const refused = "writes only its own virtual nodes"
		Expect(primary.Client.Create(ctx, node("worker-1"))).To(Succeed(), "a real node, the cluster's")
		Eventually(func() error { return mgr.Create(ctx, node("worker-2")) }).WithContext(ctx).WithTimeout(30 * time.Second).
			Should(MatchError(ContainSubstring(refused)))
		var w corev1.Node
		Expect(primary.Client.Get(ctx, client.ObjectKey{Name: "worker-1"}, &w)).To(Succeed())
		base := w.DeepCopy()
		w.Spec.Unschedulable = true
		Expect(mgr.Patch(ctx, &w, client.MergeFrom(base))).To(MatchError(ContainSubstring(refused)), "cordoning a real node")
		Expect(mgr.Delete(ctx, node("worker-1"))).To(MatchError(ContainSubstring(refused)))
		Expect(mgr.Create(ctx, lease("kube-node-lease", "worker-1"))).To(MatchError(ContainSubstring(refused)))
		// The controls: its virtual node, its node Lease, its leader election Lease.
		Expect(mgr.Create(ctx, node("flotilla-east"))).To(Succeed())
		Expect(mgr.Create(ctx, lease("kube-node-lease", "flotilla-east"))).To(Succeed())
		Expect(mgr.Create(ctx, lease(flotillav1.SystemNamespace, "flotilla-manager.flotilla.dev"))).To(Succeed())
		Expect(mgr.Delete(ctx, node("flotilla-east"))).To(Succeed())
		Expect(primary.Client.Delete(ctx, node("worker-1"))).To(Succeed())
	})
})

var _ = Describe("the chart's fence on the manager's pods, claims and volumes", func() {
	It("lets the manager write only proxies and pods on its virtual nodes, claims of class flotilla and the volumes that stand for real claims", func(ctx SpecContext) {
		mgr := as(manager, "system:serviceaccounts", "system:authenticated")
		pod := func(namespace, name string, labels, annotations map[string]string) *corev1.Pod {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels, Annotations: annotations},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
			Expect(primary.Client.Create(ctx, p)).To(Succeed())
			return p
		}
		relabel := func(c client.Client, p *corev1.Pod) error {
			var live corev1.Pod
			Expect(primary.Client.Get(ctx, client.ObjectKeyFromObject(p), &live)).To(Succeed())
			base := live.DeepCopy()
			live.Annotations = map[string]string{"image": "evil:latest"}
			return c.Patch(ctx, &live, client.MergeFrom(base))
		}
		const refused = "the Flotilla manager writes only"
		theirs := pod("plain", "theirs", map[string]string{"app": "db"}, nil)
		Eventually(func() error { return relabel(mgr, theirs) }).WithContext(ctx).WithTimeout(30 * time.Second).
			Should(MatchError(ContainSubstring(refused + " proxies")))
		Expect(mgr.Delete(ctx, theirs)).To(MatchError(ContainSubstring(refused)))
		// Claims of another class and volumes that are not Flotilla's: refused.
		claim := func(name, class string) *corev1.PersistentVolumeClaim {
			c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "plain", Name: name},
				Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(class), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
			Expect(primary.Client.Create(ctx, c)).To(Succeed())
			return c
		}
		finalize := func(c client.Client, pvc *corev1.PersistentVolumeClaim) error {
			var live corev1.PersistentVolumeClaim
			Expect(primary.Client.Get(ctx, client.ObjectKeyFromObject(pvc), &live)).To(Succeed())
			base := live.DeepCopy()
			live.Finalizers = append(live.Finalizers, flotillav1.FinalizerVolume)
			return c.Patch(ctx, &live, client.MergeFrom(base))
		}
		Expect(finalize(mgr, claim("standard-data", "standard"))).To(MatchError(ContainSubstring(refused + " claims of class flotilla")))
		volume := func(name string) *corev1.PersistentVolume {
			return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/x"}}}}
		}
		Expect(mgr.Create(ctx, volume("pv-elsewhere"))).To(MatchError(ContainSubstring(refused + " the volumes")))
		// The controls: a proxy, a claim of class flotilla, a stand-in volume.
		// As the webhook would have made it (flotilla-proxies asks only that a seal be there).
		proxy := pod("enabled", "a-proxy", map[string]string{flotillav1.LabelProxy: "true"},
			map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationSeal: "v1.n.AAAA"})
		Expect(relabel(mgr, proxy)).To(Succeed())
		Expect(finalize(mgr, claim("remote-data", flotillav1.StorageClassRemote))).To(Succeed())
		Expect(mgr.Create(ctx, volume("flotilla-0f1e2d3c"))).To(Succeed())
		Expect(mgr.Delete(ctx, volume("flotilla-0f1e2d3c"))).To(Succeed())
	})
})

var _ = Describe("the chart's fence on the Replicators' writes", func() {
	It("lets the manager write workloads, Secrets and namespaces only where Replicators may: its namespace, namespaces a Replicator created, namespaces that opted in", func(ctx SpecContext) {
		mgr := as(manager, "system:serviceaccounts", "system:authenticated")
		Expect(primary.Namespace(ctx, "argocd", nil)).To(Succeed())
		Expect(primary.Namespace(ctx, "opted-in", map[string]string{flotillav1.LabelReplicationAllowed: "true"})).To(Succeed())
		// What a Replicator creates (pkg/controllers/replicator, ensureNamespace).
		created := func(name string) *corev1.Namespace {
			return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
				Annotations: map[string]string{flotillav1.AnnotationCreatedBy: "primary-id/replicator-uid"}}}
		}
		Expect(primary.Client.Create(ctx, created("replicated"))).To(Succeed())
		deployment := func(namespace string) *appsv1.Deployment {
			labels := map[string]string{"app": "web"}
			return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "web"},
				Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
		}
		secret := func(namespace, name string) *corev1.Secret {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, StringData: map[string]string{"k": "v"}}
		}
		const refused = "only in namespaces a Replicator created"
		Eventually(func() error { return mgr.Create(ctx, deployment("argocd")) }).WithContext(ctx).WithTimeout(30 * time.Second).
			Should(MatchError(And(ContainSubstring(refused), ContainSubstring("namespace argocd"),
				ContainSubstring(flotillav1.LabelReplicationAllowed+"=true"))))
		Expect(mgr.Create(ctx, secret("argocd", "creds"))).To(MatchError(ContainSubstring(refused)))
		// What is there already is neither changed nor deleted.
		Expect(primary.Client.Create(ctx, secret("argocd", "repo-creds"))).To(Succeed())
		var theirs corev1.Secret
		Expect(primary.Client.Get(ctx, client.ObjectKey{Namespace: "argocd", Name: "repo-creds"}, &theirs)).To(Succeed())
		base := theirs.DeepCopy()
		theirs.StringData = map[string]string{"k": "stolen"}
		Expect(mgr.Patch(ctx, &theirs, client.MergeFrom(base))).To(MatchError(ContainSubstring(refused)))
		Expect(mgr.Delete(ctx, secret("argocd", "repo-creds"))).To(MatchError(ContainSubstring(refused)))
		// The controls: a namespace that opted in, one a Replicator created, and the manager's own.
		for _, ns := range []string{"opted-in", "replicated"} {
			Expect(mgr.Create(ctx, deployment(ns))).To(Succeed(), "in %s", ns)
			Expect(mgr.Create(ctx, secret(ns, "web-tls"))).To(Succeed(), "in %s", ns)
			Expect(mgr.Delete(ctx, deployment(ns))).To(Succeed(), "in %s", ns)
		}
		Expect(mgr.Create(ctx, secret(flotillav1.SystemNamespace, flotillav1.ReplicatorCASecretName("web")))).To(Succeed(), "a Replicator's CA")

		// Namespaces: created only marked as a Replicator's, deleted only when they are.
		const notOurs = "only namespaces a Replicator created"
		Expect(mgr.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "unmarked"}})).
			To(MatchError(And(ContainSubstring(notOurs), ContainSubstring("namespace unmarked"))))
		Expect(mgr.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "argocd"}})).
			To(MatchError(And(ContainSubstring(notOurs), ContainSubstring("namespace argocd"))))
		Expect(mgr.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "opted-in"}})).
			To(MatchError(ContainSubstring(notOurs)), "opting in lets Replicators write there, not delete it")
		Expect(mgr.Create(ctx, created("mine"))).To(Succeed())
		Expect(mgr.Delete(ctx, created("mine"))).To(Succeed())
		Expect(mgr.Delete(ctx, created("replicated"))).To(Succeed())
	})
})

var _ = Describe("the chart's fence on the Multi-Cluster Services writes", func() {
	It("lets the manager write imports, their EndpointSlices and flotilla-mcs-* Services only of their own shape, never in kube-*, default or flotilla-system", func(ctx SpecContext) {
		mgr := as(manager, "system:serviceaccounts", "system:authenticated")
		slice := func(ns, name, service string) *discoveryv1.EndpointSlice {
			return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
				Labels: map[string]string{discoveryv1.LabelManagedBy: "flotilla.dev", flotillav1.LabelPrimary: "primary-id",
					discoveryv1.LabelServiceName: service, mcsv1beta1.LabelServiceName: "hello"}}, AddressType: discoveryv1.AddressTypeIPv4}
		}
		svc := func(ns, name string, mut ...func(*corev1.Service)) *corev1.Service {
			s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
				Labels: map[string]string{flotillav1.LabelPrimary: "primary-id", mcsv1beta1.LabelServiceName: "hello"}},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 42}}}}
			for _, m := range mut {
				m(s)
			}
			return s
		}
		const shape, where = "writes EndpointSlices only for its flotilla-mcs-* Services", "writes no Multi-Cluster Services object in kube-*"
		Eventually(func() error { return mgr.Create(ctx, slice("plain", "web-abc", "web")) }).WithContext(ctx).WithTimeout(30*time.Second).
			Should(MatchError(ContainSubstring(shape)), "an EndpointSlice for another Service")
		Expect(mgr.Create(ctx, svc("plain", "flotilla-mcs-np", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }))).To(MatchError(ContainSubstring(shape)))
		Expect(mgr.Create(ctx, svc("plain", "flotilla-mcs-sel", func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "db"} }))).To(MatchError(ContainSubstring(shape)))
		for _, ns := range []string{"kube-system", "default", flotillav1.SystemNamespace} {
			Expect(mgr.Create(ctx, slice(ns, "hello-abc", "flotilla-mcs-hello"))).To(MatchError(ContainSubstring(where)), "in %s", ns)
		}
		// The controls: as the MCS controller writes them.
		Expect(mgr.Create(ctx, svc("plain", "flotilla-mcs-hello"))).To(Succeed())
		Expect(mgr.Create(ctx, slice("plain", "hello-abc", "flotilla-mcs-hello"))).To(Succeed())
	})
})

var _ = Describe("the chart's manager", func() {
	It("renders with extraArgs, and under its read-only root filesystem writes the webhook certificate to a volume of its own", func(ctx SpecContext) {
		var deployments, services []*unstructured.Unstructured
		for _, o := range render(ctx, "manager.extraArgs={--failover-after=45s,--log-level=debug}") {
			switch o.GetKind() {
			case "Deployment":
				deployments = append(deployments, o)
			case "Service":
				if o.GetName() == "flotilla-webhook" {
					services = append(services, o)
				}
			}
		}
		Expect(deployments).To(HaveLen(1))
		Expect(services).To(HaveLen(1), "one webhook Service, not a copy per extra argument")
		var d appsv1.Deployment
		Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(deployments[0].Object, &d)).To(Succeed())
		c := d.Spec.Template.Spec.Containers[0]
		Expect(c.Args).To(ContainElements("--failover-after=45s", "--log-level=debug"))
		Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
		var certDir string
		for _, a := range c.Args {
			if dir, ok := strings.CutPrefix(a, "--webhook-cert-dir="); ok {
				certDir = dir
			}
		}
		Expect(certDir).NotTo(BeEmpty(), "the certificate directory is given, not a temporary one under the read-only root")
		Expect(c.VolumeMounts).To(ContainElement(And(HaveField("MountPath", certDir), HaveField("ReadOnly", BeFalse()))))
		// The API server takes it as rendered.
		Expect(primary.Client.Create(ctx, deployments[0], client.DryRunAll)).To(Succeed())
	})

	It("gives the manager its own memory limit, from which it sets Go's soft limit", func(ctx SpecContext) {
		var d appsv1.Deployment
		for _, o := range render(ctx, "manager.resources.limits.memory=300Mi") {
			if o.GetKind() == "Deployment" {
				Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d)).To(Succeed())
			}
		}
		c := d.Spec.Template.Spec.Containers[0]
		Expect(c.Resources.Limits.Memory().String()).To(Equal("300Mi"))
		Expect(c.Env).To(ContainElement(And(HaveField("Name", "FLOTILLA_CONTAINER_MEMORY_LIMIT"),
			HaveField("ValueFrom.ResourceFieldRef.ContainerName", c.Name), HaveField("ValueFrom.ResourceFieldRef.Resource", "limits.memory"))))
	})
})
