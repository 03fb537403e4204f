package chart_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/integration/clusterenv"
)

// What the next chart version adds to the Replicator CRD in the upgrade spec.
const (
	nextField  = "upgradeProbe"
	nextColumn = "Upgrade Probe"
)

// nextChart writes to dir a copy of the chart whose Replicator CRD gains a spec field and a
// printer column, wherever the chart keeps that CRD.
func nextChart(dir string) error {
	if err := copyChart(dir); err != nil {
		return err
	}
	var crd string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "flotilla.dev_replicators.yaml" {
			crd = path
		}
		return err
	})
	if err != nil || crd == "" {
		return fmt.Errorf("finding the Replicator CRD in the chart (%q): %w", crd, err)
	}
	raw, err := os.ReadFile(crd)
	if err != nil {
		return err
	}
	text := string(raw)
	for _, edit := range [][2]string{
		{"  - additionalPrinterColumns:\n", "  - additionalPrinterColumns:\n    - jsonPath: .spec." + nextField + "\n      name: " + nextColumn + "\n      type: string\n"},
		{"          spec:\n            properties:\n", "          spec:\n            properties:\n              " + nextField + ":\n                type: string\n"},
	} {
		if !strings.Contains(text, edit[0]) {
			return fmt.Errorf("%s has no %q to extend", crd, edit[0])
		}
		text = strings.Replace(text, edit[0], edit[1], 1)
	}
	return os.WriteFile(crd, []byte(text), 0o644)
}

// hasNext says whether the served Replicator CRD has what nextChart adds.
func hasNext(crd *apiextensionsv1.CustomResourceDefinition) (field, column bool) {
	for _, v := range crd.Spec.Versions {
		if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			_, field = v.Schema.OpenAPIV3Schema.Properties["spec"].Properties[nextField]
		}
		for _, c := range v.AdditionalPrinterColumns {
			column = column || c.Name == nextColumn
		}
	}
	return field, column
}

var _ = Describe("the chart's CRDs, installed, upgraded and kept by helm", Ordered, Label("upgrade"), func() {
	var (
		home, kubeconfig string
		bare             client.Client
	)
	const release, ns = "flotilla", flotillav1.SystemNamespace
	helm := func(ctx context.Context, args ...string) (string, error) {
		return runHelm(ctx, home, append([]string{"--kubeconfig", kubeconfig, "--kube-context", "bare"}, args...)...)
	}
	// --no-hooks: no Job ever runs here (no controller-manager), and the uninstall Job is not what
	// these specs are about.
	uninstall := func(ctx context.Context) {
		out, err := helm(ctx, "uninstall", release, "-n", ns, "--no-hooks")
		ExpectWithOffset(1, err).NotTo(HaveOccurred(), out)
	}
	crd := func(ctx context.Context, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
		c := &apiextensionsv1.CustomResourceDefinition{}
		return c, bare.Get(ctx, client.ObjectKey{Name: name}, c)
	}
	replicatorCRD := func(ctx context.Context) (field, column bool, err error) {
		c, err := crd(ctx, "replicators.flotilla.dev")
		if err != nil {
			return false, false, err
		}
		field, column = hasNext(c)
		return field, column, nil
	}

	// An API server of its own, without Flotilla's CRDs: helm alone installs them.
	BeforeAll(func(ctx SpecContext) {
		env := &envtest.Environment{BinaryAssetsDirectory: os.Getenv("FLOTILLA_TOOLS_DIR")}
		cfg, err := env.Start()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(env.Stop)
		scheme := runtime.NewScheme()
		utilruntime.Must(clientgoscheme.AddToScheme(scheme))
		utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
		utilruntime.Must(flotillav1.AddToScheme(scheme))
		bare, err = client.New(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		raw, err := clusterenv.Kubeconfig(&clusterenv.Cluster{Name: "bare", Config: cfg})
		Expect(err).NotTo(HaveOccurred())
		home = GinkgoT().TempDir()
		kubeconfig = filepath.Join(home, "kubeconfig")
		Expect(os.WriteFile(kubeconfig, raw, 0o600)).To(Succeed())
	}, NodeTimeout(2*time.Minute))

	It("upgrades the CRDs with the release: a field and a printer column the next chart adds to the Replicator CRD are served after helm upgrade", func(ctx SpecContext) {
		out, err := helm(ctx, "install", release, chartDir, "-n", ns, "--create-namespace", "--set", "manager.extraArgs={--proxy-workers=8}")
		Expect(err).NotTo(HaveOccurred(), out)
		for _, name := range primaryCRDs {
			_, err := crd(ctx, name)
			Expect(err).NotTo(HaveOccurred(), "helm install created %s", name)
		}
		Expect(replicatorCRD(ctx)).To(BeFalse(), "the installed chart's CRD has no %s yet", nextField)

		next := GinkgoT().TempDir()
		Expect(nextChart(next)).To(Succeed())
		out, err = helm(ctx, "upgrade", release, next, "-n", ns, "--set", "manager.extraArgs={--proxy-workers=16}")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() error {
			field, column, err := replicatorCRD(ctx)
			if err != nil {
				return err
			}
			if !field || !column {
				return fmt.Errorf("after helm upgrade the Replicator CRD has spec.%s %v and printer column %q %v", nextField, field, nextColumn, column)
			}
			return nil
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		// The rest of the release moved with it: the manager Deployment has the new arguments.
		d := &appsv1.Deployment{}
		Expect(bare.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flotilla-manager"}, d)).To(Succeed())
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(And(ContainElement("--proxy-workers=16"), Not(ContainElement("--proxy-workers=8"))))
	}, SpecTimeout(3*time.Minute))

	It("keeps the CRDs, and every object of their kinds, at helm uninstall", func(ctx SpecContext) {
		cd := &flotillav1.ClusterDetector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "users-own"},
			Spec: flotillav1.ClusterDetectorSpec{Context: "users-own"}}
		Expect(bare.Create(ctx, cd)).To(Succeed())
		for _, name := range primaryCRDs {
			c, err := crd(ctx, name)
			Expect(err).NotTo(HaveOccurred())
			Expect(c.Annotations).To(HaveKeyWithValue(keepPolicy, "keep"), name)
		}
		uninstall(ctx)
		_, err := helm(ctx, "status", release, "-n", ns)
		Expect(err).To(HaveOccurred(), "the release is gone")
		for _, name := range primaryCRDs {
			_, err := crd(ctx, name)
			Expect(err).NotTo(HaveOccurred(), "%s kept", name)
		}
		Expect(bare.Get(ctx, client.ObjectKeyFromObject(cd), cd)).To(Succeed(), "the ClusterDetector survived")
	}, SpecTimeout(3*time.Minute))

	It("takes the kept CRDs back at the next helm install of the release, as that chart has them", func(ctx SpecContext) {
		out, err := helm(ctx, "install", release, chartDir, "-n", ns)
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() error {
			field, _, err := replicatorCRD(ctx)
			if err == nil && field {
				err = errors.New("the Replicator CRD still has the uninstalled chart's field")
			}
			return err
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("takes over CRDs installed without helm's ownership (chart 0.1.0's crds/, kubectl apply) only with --take-ownership", func(ctx SpecContext) {
		uninstall(ctx)
		// What chart 0.1.0 left: its crds/ carried no release labels or annotations.
		for _, name := range primaryCRDs {
			c, err := crd(ctx, name)
			Expect(err).NotTo(HaveOccurred())
			base := c.DeepCopy()
			delete(c.Labels, "app.kubernetes.io/managed-by")
			delete(c.Annotations, "meta.helm.sh/release-name")
			delete(c.Annotations, "meta.helm.sh/release-namespace")
			Expect(bare.Patch(ctx, c, client.MergeFrom(base))).To(Succeed())
		}
		out, err := helm(ctx, "install", release, chartDir, "-n", ns)
		Expect(err).To(HaveOccurred(), "helm adopted CRDs that were not its own: %s", out)
		Expect(out).To(ContainSubstring("invalid ownership metadata"))
		out, err = helm(ctx, "install", release, chartDir, "-n", ns, "--take-ownership")
		Expect(err).NotTo(HaveOccurred(), out)
		for _, name := range primaryCRDs {
			c, err := crd(ctx, name)
			Expect(err).NotTo(HaveOccurred())
			Expect(c.Annotations).To(HaveKeyWithValue("meta.helm.sh/release-name", release), name)
		}
		cd := &flotillav1.ClusterDetector{}
		Expect(bare.Get(ctx, client.ObjectKey{Namespace: ns, Name: "users-own"}, cd)).To(Succeed(), "objects untouched")
	}, SpecTimeout(3*time.Minute))
})
