package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// flotillaClaim is the spec of a 1Gi claim of class flotilla with one access mode.
func flotillaClaim(mode corev1.PersistentVolumeAccessMode) corev1.PersistentVolumeClaimSpec {
	return corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(flotillav1.StorageClassRemote), AccessModes: []corev1.PersistentVolumeAccessMode{mode},
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}
}

// storageFixture is what the stateful workloads' specs read in their namespace.
type storageFixture struct{ ns string }

// setUp prepares the namespace on the secondaries' real nodes, for a group's BeforeAll.
func (f storageFixture) setUp(ctx SpecContext) {
	requireSecondaryRealNodes()
	joinBothSecondaries(ctx)
	importAppImage(ctx, false)
	enabledNamespace(ctx, f.ns)
}

// clusterOfProxy is the cluster where an elected pod's proxy runs, which must be Ready.
func (f storageFixture) clusterOfProxy(g Gomega, ctx SpecContext, name string) string {
	p, err := bed.Primary.Clientset.CoreV1().Pods(f.ns).Get(ctx, name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(podReady(p)).To(BeTrue(), "proxy %s: %s %s", name, p.Status.Phase, p.Status.Message)
	cluster, ok := flotillav1.ClusterOfNode(p.Spec.NodeName)
	g.Expect(ok).To(BeTrue(), "proxy %s on %s", name, p.Spec.NodeName)
	return cluster
}

// secondaryNamed is the bed's secondary of that name.
func secondaryNamed(name string) *testbed.Cluster {
	for _, c := range bed.Secondaries {
		if c.Name == name {
			return c
		}
	}
	Fail("no secondary " + name)
	return nil
}
