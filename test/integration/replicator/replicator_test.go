// Package replicator_test is the integration suite of the Replicator on a primary alone (a real
// API server, no controller-manager): the CRD's validation as kubectl apply meets it, the
// primary-only apply and delete rules, and the condition naming an unknown target. What crosses
// clusters (targets, drift, outages) stays in the e2e suite.
package replicator_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/setup"
	"github.com/flotilla-dev/flotilla/test/integration/clusterenv"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

var (
	primary     *clusterenv.Cluster
	stopManager func() error
)

func TestReplicator(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Replicator integration")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	primary, err = clusterenv.Start("primary")
	Expect(err).NotTo(HaveOccurred())
	Expect(primary.Namespace(ctx, flotillav1.SystemNamespace, nil)).To(Succeed())
	// The manager reads the primary's ID once, at setup: kube-system is there first.
	Eventually(func() error { _, err := clusters.ClusterID(ctx, primary.Client); return err }).WithContext(ctx).Should(Succeed())

	// The manager as cmd/flotilla-manager builds it (pkg/setup), its webhook served out of cluster
	// (URL mode, its own CA and configuration): the API server sends every Replicator to the check
	// of its author's rights.
	port, err := testbed.FreePort()
	Expect(err).NotTo(HaveOccurred())
	opts := setup.DefaultOptions()
	opts.Manager.MetricsBindAddress, opts.Manager.HealthProbeBindAddress = "0", "0"
	opts.LeaderElection.Enabled = false
	opts.VirtualNodes.KubeletPort = 0
	opts.Webhook.BindHost, opts.Webhook.Port, opts.Webhook.CertDir = "127.0.0.1", port, GinkgoT().TempDir()
	opts.Webhook.URL = fmt.Sprintf("https://127.0.0.1:%d", port)
	opts.Replicator.Timeout = 5 * time.Second
	// What no watch reports (an IngressClass that arrives, so an Ingress must now be admitted) is
	// judged at the resync: 5 s here, so that the health spec's 30 s waits never race the default
	// minute.
	opts.Replicator.Resync = 5 * time.Second
	mgr, err := setup.New(ctx, primary.Config, opts, ctrl.Log)
	Expect(err).NotTo(HaveOccurred())
	stopManager = clusterenv.Run(mgr)
	// No registration Secret here: that is read too, and the registry is then ready (no clusters).
	Eventually(mgr.Registry.Ready).WithContext(ctx).WithTimeout(20*time.Second).Should(Succeed(),
		"a missing registration Secret is read as no clusters, and the manager gets ready")
	probe := plumberSample()
	probe.Name, probe.Spec.ReplicationNamespace = "webhook-probe", "webhook-probe"
	Eventually(func() error { return primary.Client.Create(ctx, probe, client.DryRunAll) }).WithContext(ctx).
		WithTimeout(20*time.Second).Should(Succeed(), "the webhook serves")
}, NodeTimeout(2*time.Minute))

var _ = AfterSuite(func() {
	if stopManager != nil {
		Expect(stopManager()).To(Succeed())
	}
	Expect(primary.Stop()).To(Succeed())
})

// plumberSample is plumber's sample Replicator, as users bring it.
func plumberSample(targets ...string) *flotillav1.Replicator {
	raw, err := os.ReadFile(filepath.Join(clusterenv.RepoRoot(), "config", "samples", "plumber-replicator.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var rep flotillav1.Replicator
	Expect(yaml.Unmarshal(raw, &rep)).To(Succeed())
	rep.Spec.TargetCluster = targets
	return &rep
}

func replicatorStatus(ctx context.Context, name string) (*flotillav1.Replicator, error) {
	var rep flotillav1.Replicator
	err := primary.Client.Get(ctx, client.ObjectKey{Name: name}, &rep)
	return &rep, err
}

var _ = Describe("the Replicator", func() {
	It("refuses invalid Replicators at create with a message, and names an unknown cluster in a condition", func(ctx SpecContext) {
		base := "apiVersion: flotilla.dev/v1alpha1\nkind: Replicator\nmetadata:\n  name: invalid\nspec:\n"
		for _, tc := range []struct{ spec, message string }{
			{"  configMapName: x\n", "replicationNamespace"},
			{"  replicationNamespace: kube-public\n", "must not be default, flotilla-system or a kube-* namespace"},
			{"  replicationNamespace: default\n", "must not be default, flotilla-system or a kube-* namespace"},
			{"  replicationNamespace: ok\n  deploymentName: d\n  deploymentSpec:\n    template:\n      spec:\n        containers: []\n", "must list at least one container"},
			{"  replicationNamespace: ok\n  ingressSecureEnabled: true\n", "ingressSecureEnabled needs ingressSpec.rules"},
			{"  replicationNamespace: ok\n  ingressSecureEnabled: true\n  ingressName: i\n  ingressSpec:\n    rules:\n    - http:\n        paths: []\n", "a host each"},
			{"  replicationNamespace: ok\n  resources:\n  - apiVersion: v1\n    kind: Namespace\n    metadata:\n      name: p\n", "kind Namespace (v1) is cluster-scoped"},
			{"  replicationNamespace: ok\n  resources:\n  - apiVersion: flotilla.dev/v1alpha1\n    kind: Replicator\n    metadata:\n      name: p\n", "Flotilla's own kinds"},
			{"  replicationNamespace: ok\n  targetCluster: ['*', 'a']\n", "cannot be combined"},
			{"  replicationNamespace: ok\n  configMapName: Not_A_Name\n", "spec.configMapName"},
			{"  replicationNamespace: ok\n  serviceName: 9lives\n", "spec.serviceName"},
			{"  replicationNamespace: ok\n  ingressName: a..b\n", "spec.ingressName"},
			{"  replicationNamespace: ok\n  deploymentName: -d\n", "spec.deploymentName"},
			{"  replicationNamespace: ok\n  resources:\n  - apiVersion: v1\n    kind: ConfigMap\n    metadata:\n      name: UPPER\n", "metadata.name"},
			{"  replicationNamespace: ok\n  targetCluster: [a]\n  rollout:\n    waves: []\n", "spec.rollout.waves"},
			{"  replicationNamespace: ok\n  targetCluster: [a]\n  rollout:\n    waves:\n    - clusters: []\n", "spec.rollout.waves[0].clusters"},
			{"  replicationNamespace: ok\n  targetCluster: [a, b]\n  rollout:\n    waves:\n    - clusters: [a]\n    - clusters: [c]\n", "rollout.waves may name only clusters of targetCluster"},
			{"  replicationNamespace: ok\n  targetCluster: [a, b]\n  rollout:\n    waves:\n    - clusters: [a]\n    - clusters: [b, a]\n", "a cluster may be in one wave only"},
			{"  replicationNamespace: ok\n  targetCluster: [a]\n  rollout:\n    waves:\n    - clusters: [a, a]\n", "Duplicate value"},
			{"  replicationNamespace: ok\n  targetCluster: [a]\n  placement: Elect\n  deploymentName: d\n  deploymentSpec:\n    template:\n      spec:\n        containers: [{name: c, image: i}]\n  rollout:\n    waves:\n    - clusters: [a]\n", "rollout needs placement Replicate"},
		} {
			u := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal([]byte(base+tc.spec), &u.Object)).To(Succeed())
			err := primary.Client.Create(ctx, u)
			Expect(err).To(HaveOccurred(), "accepted: %s", tc.spec)
			Expect(err.Error()).To(ContainSubstring(tc.message), "for %s", tc.spec)
		}

		for _, ok := range []string{
			"  replicationNamespace: ok\n  targetCluster: [a, b]\n  rollout:\n    waves:\n    - clusters: [a]\n    - clusters: [primary, b]\n",
			"  replicationNamespace: ok\n  targetCluster: ['*']\n  rollout:\n    waves:\n    - clusters: [any-name]\n",
		} {
			u := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal([]byte(base+ok), &u.Object)).To(Succeed())
			Expect(primary.Client.Create(ctx, u, client.DryRunAll)).To(Succeed(), "refused: %s", ok)
		}

		rep := plumberSample("atlantis")
		rep.Name, rep.Spec.ReplicationNamespace, rep.Spec.IngressSecureEnabled = "unknown-target", "unknown-target", false
		Expect(primary.Client.Create(ctx, rep)).To(Succeed())
		Eventually(func(g Gomega) {
			st, err := replicatorStatus(ctx, rep.Name)
			g.Expect(err).NotTo(HaveOccurred())
			cond := meta.FindStatusCondition(st.Status.Conditions, flotillav1.ConditionSynced)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(cond.Reason).To(Equal(flotillav1.ReasonUnknownTargets))
			g.Expect(cond.Message).To(ContainSubstring("atlantis"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(primary.Client.Delete(ctx, rep)).To(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("cannot touch the manager's own Secrets, whatever it is named", func(ctx SpecContext) {
		// The webhook's CA, which the manager made: a Replicator named after it once took it as its
		// own CA, and deleted it.
		webhookCA := &corev1.Secret{}
		Expect(primary.Client.Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: flotillav1.WebhookCASecretName},
			webhookCA)).To(Succeed())
		rep := plumberSample()
		rep.Name, rep.Spec.ReplicationNamespace = "flotilla-webhook", "named-like-the-manager"
		Expect(primary.Client.Create(ctx, rep)).To(Succeed())
		Eventually(func(g Gomega) {
			st, err := replicatorStatus(ctx, rep.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Status.Synced).To(Equal("synced"))
			g.Expect(primary.Client.Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace,
				Name: flotillav1.ReplicatorCASecretName(rep.Name)}, &corev1.Secret{})).To(Succeed(), "its own CA Secret")
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(primary.Client.Delete(ctx, rep)).To(Succeed())
		Eventually(func() error { _, err := replicatorStatus(ctx, rep.Name); return err }).WithContext(ctx).
			WithTimeout(30 * time.Second).Should(MatchError(ContainSubstring("not found")))
		var after corev1.Secret
		Expect(primary.Client.Get(ctx, client.ObjectKeyFromObject(webhookCA), &after)).To(Succeed(), "the webhook's CA survives")
		Expect(after.Data).To(Equal(webhookCA.Data))
	}, SpecTimeout(2*time.Minute))

	It("never takes over, overwrites or deletes a user's object of the same name, and says so", func(ctx SpecContext) {
		const ns = "users-own"
		Expect(primary.Namespace(ctx, ns, map[string]string{flotillav1.LabelReplicationAllowed: "true"})).To(Succeed())
		mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nginx", Labels: map[string]string{"owner": "me"}},
			Data: map[string]string{"mine": "yes"}}
		Expect(primary.Client.Create(ctx, mine)).To(Succeed())
		rep := plumberSample()
		rep.Name, rep.Spec.ReplicationNamespace, rep.Spec.IngressSecureEnabled = "users-own", ns, false
		Expect(primary.Client.Create(ctx, rep)).To(Succeed())
		Eventually(func(g Gomega) {
			st, err := replicatorStatus(ctx, rep.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Status.Synced).To(Equal("not synced"))
			g.Expect(st.Status.Applied).To(ContainElement(And(HaveField("Kind", "ConfigMap"), HaveField("Message", ContainSubstring("is not this Replicator's")))))
			g.Expect(primary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nginx"}, &appsv1.Deployment{})).To(Succeed(), "the rest is applied")
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(primary.Client.Delete(ctx, rep)).To(Succeed())
		Eventually(func() error { _, err := replicatorStatus(ctx, rep.Name); return err }).WithContext(ctx).
			WithTimeout(30 * time.Second).Should(MatchError(ContainSubstring("not found")))
		var after corev1.ConfigMap
		Expect(primary.Client.Get(ctx, client.ObjectKeyFromObject(mine), &after)).To(Succeed(), "the user's ConfigMap survives")
		Expect(after.Data).To(Equal(mine.Data))
		Expect(after.Labels).To(Equal(mine.Labels), "never labelled as the Replicator's")
	}, SpecTimeout(2*time.Minute))

	It("keeps a namespace it created when a user added a workload and a claim to it", func(ctx SpecContext) {
		const ns = "created-then-shared"
		rep := plumberSample()
		rep.Name, rep.Spec.ReplicationNamespace, rep.Spec.IngressSecureEnabled = "shared", ns, false
		Expect(primary.Client.Create(ctx, rep)).To(Succeed())
		Eventually(func(g Gomega) {
			st, err := replicatorStatus(ctx, rep.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Status.Synced).To(Equal("synced"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(primary.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}})).To(Succeed())
		zero := int32(0)
		sel := map[string]string{"app": "users"}
		Expect(primary.Client.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "users"},
			Spec: appsv1.DeploymentSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}})).To(Succeed())
		Expect(primary.Client.Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}})).To(Succeed())

		Expect(primary.Client.Delete(ctx, rep)).To(Succeed())
		Eventually(func() error { _, err := replicatorStatus(ctx, rep.Name); return err }).WithContext(ctx).
			WithTimeout(30 * time.Second).Should(MatchError(ContainSubstring("not found")))
		var live corev1.Namespace
		Expect(primary.Client.Get(ctx, client.ObjectKey{Name: ns}, &live)).To(Succeed())
		Expect(live.DeletionTimestamp).To(BeNil(), "a namespace holding a user's objects is kept")
		Expect(primary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "users"}, &appsv1.Deployment{})).To(Succeed())
		Expect(primary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data"}, &corev1.PersistentVolumeClaim{})).To(Succeed())
		Expect(primary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nginx"}, &appsv1.Deployment{})).To(
			MatchError(ContainSubstring("not found")), "what the Replicator applied is gone")
	}, SpecTimeout(2*time.Minute))

	It("without targetCluster touches the primary only, removes what it applied when deleted, and keeps a namespace that existed before", func(ctx SpecContext) {
		const ns = "kept-ns"
		Expect(primary.Namespace(ctx, ns, map[string]string{flotillav1.LabelReplicationAllowed: "true"})).To(Succeed())
		rep := plumberSample()
		rep.Name, rep.Spec.ReplicationNamespace, rep.Spec.IngressSecureEnabled = "primary-only", ns, false
		Expect(primary.Client.Create(ctx, rep)).To(Succeed())
		Eventually(func(g Gomega) {
			st, err := replicatorStatus(ctx, rep.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Status.Synced).To(Equal("synced"))
			g.Expect(st.Status.ClusterCount).To(Equal("1/1"))
			g.Expect(primary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nginx"}, &appsv1.Deployment{})).To(Succeed())
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		Expect(primary.Client.Delete(ctx, rep)).To(Succeed())
		Eventually(func(g Gomega) {
			err := primary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nginx"}, &appsv1.Deployment{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Deployment: %v", err)
			err = primary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nginx"}, &corev1.ConfigMap{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ConfigMap: %v", err)
			_, err = replicatorStatus(ctx, rep.Name)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the finalizer is released: %v", err)
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		var live corev1.Namespace
		Expect(primary.Client.Get(ctx, client.ObjectKey{Name: ns}, &live)).To(Succeed())
		Expect(live.DeletionTimestamp).To(BeNil(), "a namespace that existed before is kept")
	}, SpecTimeout(2*time.Minute))

	It("writes nothing into an existing namespace it did not create until the namespace opts in, and says why", func(ctx SpecContext) {
		const ns = "not-opted-in"
		Expect(primary.Namespace(ctx, ns, nil)).To(Succeed())
		rep := plumberSample()
		rep.Name, rep.Spec.ReplicationNamespace, rep.Spec.IngressSecureEnabled = "not-opted-in", ns, false
		Expect(primary.Client.Create(ctx, rep)).To(Succeed())
		Eventually(func(g Gomega) {
			st, err := replicatorStatus(ctx, rep.Name)
			g.Expect(err).NotTo(HaveOccurred())
			ready := meta.FindStatusCondition(st.Status.Conditions, flotillav1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(flotillav1.ReasonNamespaceNotAllowed))
			g.Expect(ready.Message).To(ContainSubstring(flotillav1.LabelReplicationAllowed + "=true"))
			g.Expect(st.Status.Synced).To(Equal("not synced"))
			var events eventsv1.EventList
			g.Expect(primary.Client.List(ctx, &events)).To(Succeed())
			g.Expect(events.Items).To(ContainElement(And(HaveField("Reason", flotillav1.ReasonNamespaceNotAllowed),
				HaveField("Regarding.Name", rep.Name))))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.ConfigMap{}, &corev1.Service{}} {
			Expect(primary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nginx"}, o)).To(
				MatchError(ContainSubstring("not found")), "nothing written: %T", o)
		}

		var live corev1.Namespace
		Expect(primary.Client.Get(ctx, client.ObjectKey{Name: ns}, &live)).To(Succeed())
		live.Labels = map[string]string{flotillav1.LabelReplicationAllowed: "true"}
		Expect(primary.Client.Update(ctx, &live)).To(Succeed())
		Eventually(func(g Gomega) {
			st, err := replicatorStatus(ctx, rep.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Status.Synced).To(Equal("synced"))
			g.Expect(primary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nginx"}, &appsv1.Deployment{})).To(Succeed())
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(), "once opted in, it is written")
		Expect(primary.Client.Delete(ctx, rep)).To(Succeed())
		Eventually(func() error { _, err := replicatorStatus(ctx, rep.Name); return err }).WithContext(ctx).
			WithTimeout(30 * time.Second).Should(MatchError(ContainSubstring("not found")))
	}, SpecTimeout(2*time.Minute))

	It("reports health: Healthy only once the Deployment is available, its Service has a ready endpoint and an Ingress of an existing class is admitted", func(ctx SpecContext) {
		// No controller-manager here: the test plays the Deployment and EndpointSlice controllers
		// and the ingress controller, and the Replicator judges what they wrote.
		const ns = "health"
		rep := plumberSample()
		rep.Name, rep.Spec.ReplicationNamespace = "health", ns
		Expect(primary.Client.Create(ctx, rep)).To(Succeed())
		healthOf := func(g Gomega, kind string) flotillav1.ObjectHealth {
			st, err := replicatorStatus(ctx, rep.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Status.Clusters).To(HaveLen(1))
			for _, h := range st.Status.Clusters[0].Health {
				if h.Kind == kind {
					return h
				}
			}
			g.Expect(st.Status.Clusters[0].Health).To(ContainElement(HaveField("Kind", kind)))
			return flotillav1.ObjectHealth{}
		}
		healthy := func(g Gomega) *metav1.Condition {
			st, err := replicatorStatus(ctx, rep.Name)
			g.Expect(err).NotTo(HaveOccurred())
			c := meta.FindStatusCondition(st.Status.Conditions, flotillav1.ConditionHealthy)
			g.Expect(c).NotTo(BeNil())
			return c
		}
		Eventually(func(g Gomega) {
			g.Expect(healthy(g)).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", flotillav1.ReasonUnhealthy),
				HaveField("Message", ContainSubstring("primary: Deployment nginx: Progressing"))))
			g.Expect(healthOf(g, "Service")).To(HaveField("Reason", "NoEndpoints"))
			g.Expect(healthOf(g, "Ingress")).To(And(HaveField("Healthy", true), HaveField("Reason", "NoIngressController")))
			g.Expect(healthOf(g, "Secret")).To(And(HaveField("Healthy", true), HaveField("Reason", "Valid")))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		var d appsv1.Deployment
		Expect(primary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nginx"}, &d)).To(Succeed())
		ready := true
		Expect(primary.Client.Create(ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nginx-abc",
			Labels: map[string]string{discoveryv1.LabelServiceName: "nginx"}}, AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}})).To(Succeed())
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}
		Expect(primary.Client.Status().Update(ctx, &d)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(healthy(g)).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", flotillav1.ReasonHealthy)))
			g.Expect(healthOf(g, "Deployment")).To(And(HaveField("Healthy", true), HaveField("Reason", "Available")))
			g.Expect(healthOf(g, "Service")).To(And(HaveField("Healthy", true), HaveField("Message", "1 ready endpoint(s)")))
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(), "the Deployment is available and the Service has an endpoint")

		// An ingress controller arrives (its IngressClass): the Ingress must now be admitted.
		class := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx"}, Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"}}
		Expect(primary.Client.Create(ctx, class)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(primary.Client.Delete(ctx, class))).To(Succeed()) })
		Eventually(func(g Gomega) {
			g.Expect(healthy(g)).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Message", ContainSubstring("Ingress nginx: NotAdmitted"))))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		var ing networkingv1.Ingress
		Expect(primary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nginx"}, &ing)).To(Succeed())
		ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.7"}}
		Expect(primary.Client.Status().Update(ctx, &ing)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(healthy(g)).To(HaveField("Status", metav1.ConditionTrue))
			g.Expect(healthOf(g, "Ingress")).To(And(HaveField("Reason", "Admitted"), HaveField("Message", ContainSubstring("192.0.2.7"))))
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(), "admitted")

		Expect(primary.Client.Delete(ctx, rep)).To(Succeed())
		Eventually(func() error { _, err := replicatorStatus(ctx, rep.Name); return err }).WithContext(ctx).
			WithTimeout(30 * time.Second).Should(MatchError(ContainSubstring("not found")))
	}, SpecTimeout(3*time.Minute))
})
