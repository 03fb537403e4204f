package access_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/pkg/access"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/integration/clusterenv"
)

// The kinds a secondary's admin allows a primary at join (--kinds, --crds): its Replicators'
// custom resources, fenced like the built-in kinds, and the definitions of those kinds alone,
// created and changed only as that primary's, never deleted.
var _ = Describe("the kinds a secondary's admin allows (join --kinds --crds)", Ordered, func() {
	var (
		kindNames access.Names
		asKinds   client.Client
	)
	definition := func(plural string, labels map[string]string) *apiextensionsv1.CustomResourceDefinition {
		kind := map[string]string{"widgets": "Widget", "sprockets": "Sprocket", "gadgets": "Gadget"}[plural]
		open := true
		return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: plural + ".example.com", Labels: labels},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ListKind: kind + "List"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &open}}}}}}
	}
	ours := func() map[string]string { return map[string]string{flotillav1.LabelPrimary: kindNames.PrimaryID} }
	// byFence is how the API server names a refusal of this primary's admission policy.
	byFence := func() string { return "ValidatingAdmissionPolicy '" + kindNames.Policy + "'" }

	BeforeAll(func(ctx SpecContext) {
		kindNames = access.NamesFor("a1b2c3d4e5f60718-kinds")
		allowed := []schema.GroupResource{{Group: "example.com", Resource: "widgets"}, {Group: "example.com", Resource: "sprockets"}}
		for _, o := range access.Objects(kindNames, "east", access.Limits{Kinds: allowed, Definitions: true}) {
			if o.GetNamespace() == "" && o.GetName() == flotillav1.SystemNamespace {
				continue // the suite's join made it
			}
			Expect(secondary.Client.Create(ctx, o)).To(Succeed(), "%T %s", o, o.GetName())
		}
		Expect(secondary.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kinds-managed",
			Labels: map[string]string{flotillav1.LabelManagedBy: kindNames.PrimaryID}}})).To(Succeed())
		// The cluster's own definition of an allowed kind.
		Expect(secondary.Client.Create(ctx, definition("sprockets", nil))).To(Succeed())
		cfg := rest.CopyConfig(secondary.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: kindNames.Username(),
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + flotillav1.SystemNamespace, "system:authenticated"}}
		var err error
		asKinds, err = client.New(cfg, client.Options{Scheme: clusterenv.Scheme})
		Expect(err).NotTo(HaveOccurred())
		// Enforced once the API server has compiled the policy: a definition not allowed is refused by it.
		Eventually(func() error {
			err := asKinds.Create(ctx, definition("gadgets", ours()))
			if err == nil {
				_ = secondary.Client.Delete(ctx, definition("gadgets", nil))
			}
			return err
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(MatchError(ContainSubstring(byFence())))
	})

	It("lets the identity create and change the definitions allowed, only labelled as its own, never another's, never delete one; and write the kinds only where the fence lets it", func(ctx SpecContext) {
		Expect(asKinds.Create(ctx, definition("widgets", nil))).To(MatchError(ContainSubstring(byFence())), "created unlabelled, it would look like the cluster's own")
		Expect(asKinds.Create(ctx, definition("widgets", ours()))).To(Succeed())
		// Merge patches: the API server writes the definitions' status meanwhile.
		def := definition("widgets", nil)
		Expect(asKinds.Patch(ctx, def, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"changed":"yes"}}}`)))).To(Succeed())
		err := asKinds.Delete(ctx, def)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "deleting a definition deletes every object of its kind: %v", err)

		Expect(asKinds.Get(ctx, client.ObjectKey{Name: "sprockets.example.com"}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed())
		take := []byte(`{"metadata":{"labels":{"` + flotillav1.LabelPrimary + `":"` + kindNames.PrimaryID + `"}}}`)
		Expect(asKinds.Patch(ctx, definition("sprockets", nil), client.RawPatch(types.MergePatchType, take))).To(
			MatchError(ContainSubstring(byFence())), "the cluster's own definition is not taken")

		By("a Widget: in a managed namespace, not elsewhere")
		Eventually(func() error {
			return secondary.Client.Get(ctx, client.ObjectKey{Name: "widgets.example.com"}, &apiextensionsv1.CustomResourceDefinition{})
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		widget := func(ns string) *unstructured.Unstructured {
			u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(3)}}}
			u.SetAPIVersion("example.com/v1")
			u.SetKind("Widget")
			u.SetNamespace(ns)
			u.SetName("w")
			u.SetLabels(ours())
			return u
		}
		Eventually(func() error { return asKinds.Create(ctx, widget("kinds-managed")) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(asKinds.Create(ctx, widget("unmanaged"))).To(MatchError(ContainSubstring(refused)))
		sprocket := widget("kinds-managed")
		sprocket.SetKind("Sprocket")
		Eventually(func() error { return asKinds.Create(ctx, sprocket) }).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(),
			"an allowed kind whose definition is the cluster's own")
	})
})
