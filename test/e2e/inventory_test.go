package e2e

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// The fleet for SIG-Multicluster's readers: each cluster's ClusterSet identity (KEP-2149
// ClusterProperty, About API) and each secondary's ClusterProfile (KEP-4322) in the primary. The
// bed installs CRDs of the KEPs' shape (testdata): neither API's module is served.
var _ = Describe("the fleet's inventory", Ordered, func() {
	BeforeAll(func(ctx SpecContext) {
		joinBothSecondaries(ctx)
		installInventoryCRDs(ctx)
	})

	It("gives every cluster its ClusterSet identity where the About API is served, and publishes each secondary's ClusterProfile with its health, version and properties", func(ctx SpecContext) {
		id := primaryID(ctx)
		start := time.Now()
		// The CRDs came after the manager started: it finds them at its next pass (at most a minute).
		Eventually(func(g Gomega) {
			for _, c := range bed.Clusters() {
				g.Expect(clusterProperty(g, ctx, c, "cluster.clusterset.k8s.io")).To(Equal(c.Name))
				g.Expect(clusterProperty(g, ctx, c, "clusterset.k8s.io")).To(Equal(id))
			}
			for _, c := range bed.Secondaries {
				p := clusterProfile(g, ctx, c.Name)
				g.Expect(p.GetLabels()).To(HaveKeyWithValue("x-k8s.io/cluster-manager", "flotilla"))
				manager, _, _ := unstructured.NestedString(p.Object, "spec", "clusterManager", "name")
				g.Expect(manager).To(Equal("flotilla"))
				g.Expect(conditionStatus(p, "ControlPlaneHealthy")).To(Equal("True"))
				g.Expect(conditionStatus(p, "Joined")).To(Equal("True"))
				version, _, _ := unstructured.NestedString(p.Object, "status", "version", "kubernetes")
				g.Expect(version).To(HavePrefix("v1."))
				props, _, _ := unstructured.NestedSlice(p.Object, "status", "properties")
				g.Expect(props).To(ContainElement(HaveKeyWithValue("value", c.Name)))
				g.Expect(props).To(ContainElement(HaveKeyWithValue("value", id)))
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("inventory published after its CRDs were installed", time.Since(start).Round(100*time.Millisecond).String())
	})
	// What a secondary's ClusterProfile says while it is stopped, and once it is back, is asserted
	// in the suite's one outage of a secondary (outage_test.go).
})

// installInventoryCRDs installs the About API's ClusterProperty CRD in every cluster and the
// ClusterProfile CRD in the primary, for the rest of the group; its cleanup deletes them.
func installInventoryCRDs(ctx SpecContext) {
	for _, c := range bed.Clusters() {
		installCRD(ctx, c, "about.k8s.io_clusterproperties.yaml")
	}
	installCRD(ctx, bed.Primary, "multicluster.x-k8s.io_clusterprofiles.yaml")
}

// installCRD creates a CRD of testdata in a cluster and waits until it is established; the
// group's cleanup deletes it.
func installCRD(ctx SpecContext, c *testbed.Cluster, file string) {
	raw, err := os.ReadFile(filepath.Join("testdata", file))
	Expect(err).NotTo(HaveOccurred())
	var crd apiextensionsv1.CustomResourceDefinition
	Expect(yaml.Unmarshal(raw, &crd)).To(Succeed())
	cl := clientOf(c)
	Expect(cl.Create(ctx, &crd)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, &crd))).To(Succeed()) })
	Eventually(func(g Gomega) {
		g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(&crd), &crd)).To(Succeed())
		g.Expect(crd.Status.Conditions).To(ContainElement(And(HaveField("Type", apiextensionsv1.Established), HaveField("Status", apiextensionsv1.ConditionTrue))))
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
}

// clusterProperty is the value of a cluster's About API ClusterProperty.
func clusterProperty(g Gomega, ctx SpecContext, c *testbed.Cluster, name string) string {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "about.k8s.io", Version: "v1beta1", Kind: "ClusterProperty"})
	g.Expect(clientOf(c).Get(ctx, client.ObjectKey{Name: name}, u)).To(Succeed(), "ClusterProperty %s in %s", name, c.Name)
	v, _, _ := unstructured.NestedString(u.Object, "spec", "value")
	return v
}

// clusterProfile is the ClusterProfile Flotilla publishes in the primary for a secondary.
func clusterProfile(g Gomega, ctx SpecContext, cluster string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "multicluster.x-k8s.io", Version: "v1alpha1", Kind: "ClusterProfile"})
	g.Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: "flotilla-" + cluster}, u)).To(Succeed())
	return u
}

// conditionStatus is the status of an unstructured object's condition of type t ("" if absent).
func conditionStatus(u *unstructured.Unstructured, t string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == t {
			return m["status"].(string)
		}
	}
	return ""
}
