package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdlatest "k8s.io/client-go/tools/clientcmd/api/latest"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/pkg/access"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// The fleet for SIG-Multicluster's readers: each cluster's ClusterSet identity (KEP-2149
// ClusterProperty, About API) and each secondary's ClusterProfile (KEP-4322) in the primary, and in
// a reader's namespace with what it connects through (KEP-5339). The ClusterProfile CRD and the
// secretreader plugin are the cluster inventory API module's (test/tools, set inventory); the
// About API's CRD is of the KEP's shape (testdata): its module is not served.
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
	It("lets a reader in its own namespace reach each secondary from its ClusterProfile alone, as MultiKueue does: the secretreader access provider and the Secret Flotilla keeps there", func(ctx SpecContext) {
		_, plugin, err := testbed.InventoryFiles("")
		Expect(err).NotTo(HaveOccurred())
		readerConfig := readerKubeconfig()
		want := access.NamesFor(primaryID(ctx)).Username()
		for _, c := range bed.Secondaries {
			var cfg *rest.Config
			Eventually(func(g Gomega) {
				p := &unstructured.Unstructured{}
				p.SetGroupVersionKind(schema.GroupVersionKind{Group: "multicluster.x-k8s.io", Version: "v1alpha1", Kind: "ClusterProfile"})
				g.Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: inventoryReaders, Name: "flotilla-" + c.Name}, p)).To(Succeed())
				cfg = readerRESTConfig(g, p, plugin, readerConfig)
				var secret corev1.Secret
				g.Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: inventoryReaders, Name: "flotilla-" + c.Name}, &secret)).To(Succeed())
				g.Expect(secret.Data).To(HaveKey("token"))
			}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
			cs, err := kubernetes.NewForConfig(cfg)
			Expect(err).NotTo(HaveOccurred())
			// Who the reader is there: Flotilla's joined identity, with its rights and fence.
			review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred(), "through the access provider to %s", c.Name)
			Expect(review.Status.UserInfo.Username).To(Equal(want))
			_, err = cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
			Expect(err).NotTo(HaveOccurred())
		}
	})
	// What a secondary's ClusterProfile says while it is stopped, and once it is back, is asserted
	// in the suite's one outage of a secondary (outage_test.go).
})

// inventoryReaders is the namespace of the suite's reader of the inventory (the manager's
// --inventory-namespaces, the chart's inventory.consumerNamespaces).
const inventoryReaders = "e2e-inventory-readers"

// readerKubeconfig writes the kubeconfig the secretreader plugin reads the primary with: the
// plugin reads a credential Secret in its kubeconfig's namespace, the reader's.
func readerKubeconfig() string {
	kubeconfig, err := clientcmd.LoadFromFile(bed.KubeconfigPath)
	Expect(err).NotTo(HaveOccurred())
	kubeconfig.CurrentContext = testbed.PrimaryName
	kubeconfig.Contexts[testbed.PrimaryName].Namespace = inventoryReaders
	path := filepath.Join(GinkgoT().TempDir(), "reader.kubeconfig")
	Expect(clientcmd.WriteToFile(*kubeconfig, path)).To(Succeed())
	return path
}

// readerRESTConfig builds, from a ClusterProfile's secretreader access provider, the client
// configuration a reader of the inventory builds (the cluster inventory API's
// access.Config.BuildConfigFromCP): the provider's server and CA, and the plugin, given the
// provider's exec extension, reading the Secret in the reader's namespace.
func readerRESTConfig(g Gomega, profile *unstructured.Unstructured, plugin, kubeconfig string) *rest.Config {
	providers, _, _ := unstructured.NestedSlice(profile.Object, "status", "accessProviders")
	g.Expect(providers).To(HaveLen(1))
	p := providers[0].(map[string]any)
	g.Expect(p).To(HaveKeyWithValue("name", "secretreader"))
	raw, err := json.Marshal(p["cluster"])
	g.Expect(err).NotTo(HaveOccurred())
	var v1cluster clientcmdv1.Cluster
	g.Expect(json.Unmarshal(raw, &v1cluster)).To(Succeed())
	g.Expect(v1cluster.Server).NotTo(BeEmpty())
	g.Expect(v1cluster.CertificateAuthorityData).NotTo(BeEmpty())
	internal := clientcmdapi.NewCluster()
	g.Expect(clientcmdlatest.Scheme.Convert(&v1cluster, internal, nil)).To(Succeed())
	ext, ok := internal.Extensions["client.authentication.k8s.io/exec"]
	g.Expect(ok).To(BeTrue(), "the exec extension naming the Secret")
	return &rest.Config{Host: v1cluster.Server, TLSClientConfig: rest.TLSClientConfig{CAData: v1cluster.CertificateAuthorityData},
		ExecProvider: &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: plugin, InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
			ProvideClusterInfo: true, Config: ext, Env: []clientcmdapi.ExecEnvVar{{Name: "KUBECONFIG", Value: kubeconfig}}}}
}

// installInventoryCRDs installs the About API's ClusterProperty CRD in every cluster and the
// ClusterProfile CRD in the primary, for the rest of the group; its cleanup deletes them.
func installInventoryCRDs(ctx SpecContext) {
	for _, c := range bed.Clusters() {
		installCRD(ctx, c, filepath.Join("testdata", "about.k8s.io_clusterproperties.yaml"))
	}
	crd, _, err := testbed.InventoryFiles("")
	Expect(err).NotTo(HaveOccurred())
	installCRD(ctx, bed.Primary, crd)
}

// installCRD creates a CRD of a file in a cluster and waits until it is established; the
// group's cleanup deletes it.
func installCRD(ctx SpecContext, c *testbed.Cluster, file string) {
	raw, err := os.ReadFile(file)
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
