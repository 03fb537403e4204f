package e2e

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// widgetKind is the custom kind the suite's chart lets the manager write in the primary
// (outOfClusterValues' replicator.kinds).
const (
	widgetGroup      = "e2e.example.com"
	widgetDefinition = "widgets." + widgetGroup
)

// widgetCRD is a small namespaced custom kind with a status, as a GitOps stack's CRDs are.
func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	open := true
	return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: widgetDefinition},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: widgetGroup, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					XPreserveUnknownFields: &open}}}}}}
}

// Replicators for any kind: a custom resource the primary serves is replicated where its kind is
// served, is said to be missing where it is not, has its definition copied first when the
// Replicator asks (and the secondary's admin allowed it), and is judged by its status.
var _ = Describe("Replicators of any kind", Ordered, Serial, Label("disruptive"), func() {
	const ns, name = "any-kind", "widgets"
	var s1, s2 *testbed.Cluster
	widgetIn := func(g Gomega, ctx SpecContext, c *testbed.Cluster) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(widgetGroup + "/v1")
		u.SetKind("Widget")
		g.Expect(clientOf(c).Get(ctx, client.ObjectKey{Namespace: ns, Name: "w1"}, u)).To(Succeed())
		return u
	}
	setReady := func(ctx SpecContext, c *testbed.Cluster, status string) {
		Eventually(func(g Gomega) {
			u := widgetIn(g, ctx, c)
			g.Expect(unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Ready", "status": status, "reason": "Test",
				"message": "the widget's controller says " + status, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}},
				"status", "conditions")).To(Succeed())
			g.Expect(clientOf(c).Status().Update(ctx, u)).To(Succeed())
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
	}
	clusterSync := func(rep *flotillav1.Replicator, cluster string) flotillav1.ClusterSync {
		for _, c := range rep.Status.Clusters {
			if c.Name == cluster {
				return c
			}
		}
		return flotillav1.ClusterSync{}
	}

	BeforeAll(func(ctx SpecContext) {
		s1, s2 = bed.Secondaries[0], bed.Secondaries[1]
		// The kind lives in the primary and secondary1 only.
		for _, c := range []*testbed.Cluster{bed.Primary, s1} {
			Expect(clientOf(c).Create(ctx, widgetCRD())).To(Succeed())
		}
		DeferCleanup(func(ctx SpecContext) {
			for _, c := range []*testbed.Cluster{bed.Primary, s1, s2} {
				_ = clientOf(c).Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: widgetDefinition}})
			}
			joinBothSecondaries(ctx) // the kinds allowed go with a plain join
		})
		Eventually(func(g Gomega) {
			var crd apiextensionsv1.CustomResourceDefinition
			g.Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Name: widgetDefinition}, &crd)).To(Succeed())
			g.Expect(definitionEstablished(&crd)).To(BeTrue())
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		// Each secondary's admin allows the kind; secondary2's its definition too.
		joinSecondary(ctx, s1, "--kinds", widgetDefinition)
		joinSecondary(ctx, s2, "--kinds", widgetDefinition, "--crds")
		Eventually(func(g Gomega) {
			for _, c := range bed.Secondaries {
				expectRunningAndReady(g, ctx, c.Name)
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("replicates a custom resource where its kind is served, names the kind where it is not, copies its definition when asked, and judges it by its status", func(ctx SpecContext) {
		manifest := fmt.Sprintf(`apiVersion: flotilla.dev/v1alpha1
kind: Replicator
metadata:
  name: %s
spec:
  targetCluster: [%s, %s]
  replicationNamespace: %s
  resources:
  - apiVersion: %s/v1
    kind: Widget
    metadata:
      name: w1
    spec:
      size: 3
`, name, s1.Name, s2.Name, ns, widgetGroup)
		out, err := kubectlApply(ctx, manifest)
		Expect(err).NotTo(HaveOccurred(), out)
		DeferCleanup(func(ctx SpecContext) {
			_ = clientOf(bed.Primary).Delete(ctx, &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: name}})
		})

		By("secondary1 serves the kind: the widget is there and healthy (nothing in its status says otherwise); secondary2 does not: the condition names the kind")
		Eventually(func(g Gomega) {
			rep, err := replicatorStatus(ctx, name)
			g.Expect(err).NotTo(HaveOccurred())
			in1, in2 := clusterSync(rep, s1.Name), clusterSync(rep, s2.Name)
			g.Expect(in1.Synced).To(BeTrue(), in1.Message)
			g.Expect(in1.Healthy).To(BeTrue())
			g.Expect(in1.Health).To(ContainElement(And(HaveField("Kind", "Widget"), HaveField("Name", "w1"), HaveField("Reason", "Current"))))
			g.Expect(in2.Synced).To(BeFalse())
			g.Expect(in2.Message).To(ContainSubstring("kind Widget (%s/v1) is not served in %s", widgetGroup, s2.Name))
			synced := meta.FindStatusCondition(rep.Status.Conditions, flotillav1.ConditionSynced)
			g.Expect(synced).NotTo(BeNil())
			g.Expect(synced.Reason).To(Equal(flotillav1.ReasonKindMissing))
			g.Expect(rep.Status.Applied).To(ContainElement(And(HaveField("Cluster", s1.Name), HaveField("APIVersion", widgetGroup+"/v1"),
				HaveField("Kind", "Widget"), HaveField("ApplyStatus", flotillav1.ApplyStatusOK))))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			w := widgetIn(g, ctx, s1)
			g.Expect(w.GetLabels()).To(HaveKeyWithValue(flotillav1.LabelPrimary, primaryID(ctx)))
			size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size")
			g.Expect(size).To(BeEquivalentTo(3))
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())

		By("its controller in secondary1 says it is not ready")
		setReady(ctx, s1, "False")

		By("replicateCRDs: the definition is copied to secondary2 first, then the widget; secondary1's not-ready widget makes the Replicator not Healthy")
		Expect(clientOf(bed.Primary).Patch(ctx, &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: name}},
			client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicateCRDs":true}}`)))).To(Succeed())
		Eventually(func(g Gomega) {
			rep, err := replicatorStatus(ctx, name)
			g.Expect(err).NotTo(HaveOccurred())
			in2 := clusterSync(rep, s2.Name)
			g.Expect(in2.Synced).To(BeTrue(), in2.Message)
			g.Expect(in2.Healthy).To(BeTrue())
			healthy := meta.FindStatusCondition(rep.Status.Conditions, flotillav1.ConditionHealthy)
			g.Expect(healthy).NotTo(BeNil())
			g.Expect(healthy.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(healthy.Reason).To(Equal(flotillav1.ReasonUnhealthy))
			g.Expect(healthy.Message).To(And(ContainSubstring(s1.Name), ContainSubstring("Widget w1"), ContainSubstring("the widget's controller says False")))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		var copied apiextensionsv1.CustomResourceDefinition
		Expect(clientOf(s2).Get(ctx, client.ObjectKey{Name: widgetDefinition}, &copied)).To(Succeed())
		Expect(copied.Labels).To(HaveKeyWithValue(flotillav1.LabelPrimary, primaryID(ctx)))
		Eventually(func(g Gomega) { widgetIn(g, ctx, s2) }).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		var own apiextensionsv1.CustomResourceDefinition
		Expect(clientOf(s1).Get(ctx, client.ObjectKey{Name: widgetDefinition}, &own)).To(Succeed())
		Expect(own.Labels).NotTo(HaveKey(flotillav1.LabelPrimary), "secondary1's own definition is left alone")

		By("ready again: Healthy")
		setReady(ctx, s1, "True")
		Eventually(func(g Gomega) {
			rep, err := replicatorStatus(ctx, name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(meta.IsStatusConditionTrue(rep.Status.Conditions, flotillav1.ConditionHealthy)).To(BeTrue(), "%v", rep.Status.Conditions)
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("the Replicator deleted: its widgets go in both, the definition it copied stays (deleting it would delete every widget there)")
		Expect(clientOf(bed.Primary).Delete(ctx, &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
		Eventually(func(g Gomega) {
			err := clientOf(bed.Primary).Get(ctx, client.ObjectKey{Name: name}, &flotillav1.Replicator{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
			for _, c := range []*testbed.Cluster{s1, s2} {
				u := &unstructured.Unstructured{}
				u.SetAPIVersion(widgetGroup + "/v1")
				u.SetKind("Widget")
				err := clientOf(c).Get(ctx, client.ObjectKey{Namespace: ns, Name: "w1"}, u)
				g.Expect(apierrors.IsNotFound(err) || strings.Contains(fmt.Sprint(err), "not found")).To(BeTrue(), "%s: %v", c.Name, err)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(clientOf(s2).Get(ctx, client.ObjectKey{Name: widgetDefinition}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed())
	})
})

// definitionEstablished says a definition is served.
func definitionEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
