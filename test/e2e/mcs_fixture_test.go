package e2e

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/mcs"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// mcsFixture is what the Services specs do in their namespace: real backends, their Services
// and ServiceExports, and what the imports say in each cluster.
type mcsFixture struct{ ns string }

// setUp prepares the namespace on real nodes and the flat pod network, for a group's BeforeAll.
func (f mcsFixture) setUp(ctx SpecContext) {
	flatRealNodes(ctx, f.ns)
	for _, c := range bed.Secondaries {
		prepareNamespace(ctx, c, f.ns) // the client pods' default ServiceAccount
	}
	// Before the namespace goes everywhere (registered after it, so run first): what the
	// specs made in the secondaries is the users', which Flotilla leaves where it is.
	DeferCleanup(func(ctx SpecContext) {
		for _, c := range bed.Secondaries {
			cl := clientOf(c)
			Expect(cl.DeleteAllOf(ctx, &mcsv1beta1.ServiceExport{}, client.InNamespace(f.ns))).To(Succeed())
			Expect(cl.DeleteAllOf(ctx, &appsv1.Deployment{}, client.InNamespace(f.ns))).To(Succeed())
			Expect(cl.DeleteAllOf(ctx, &appsv1.StatefulSet{}, client.InNamespace(f.ns))).To(Succeed())
			svcs, err := c.Clientset.CoreV1().Services(f.ns).List(ctx, metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred())
			for _, svc := range svcs.Items {
				if svc.Labels[flotillav1.LabelPrimary] == "" {
					Expect(client.IgnoreNotFound(cl.Delete(ctx, &svc))).To(Succeed())
				}
			}
		}
	})
}

// export makes a Service of the app's pods (port 8080, named http unless told) and its
// ServiceExport in a cluster.
func (f mcsFixture) export(ctx SpecContext, c *testbed.Cluster, name string, port int32, portName string) {
	_, err := c.Clientset.CoreV1().Services(f.ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{
			{Name: portName, Port: port, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(clientOf(c).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}})).To(Succeed())
}

// deploy runs replicas of the application on a cluster's real node; elected into a
// secondary when cluster is set (in the primary).
func (f mcsFixture) deploy(ctx SpecContext, c *testbed.Cluster, name, cluster string) {
	sel := map[string]string{"app": name}
	tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: onRealNode(appContainer("web", nil))}
	if cluster != "" {
		tpl.Annotations = map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: cluster}
	}
	one := int32(1)
	_, err := c.Clientset.AppsV1().Deployments(f.ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: tpl}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
}

// importIn is the ServiceImport of a name in a cluster.
func (f mcsFixture) importIn(g Gomega, ctx SpecContext, c *testbed.Cluster, name string) *mcsv1beta1.ServiceImport {
	var imp mcsv1beta1.ServiceImport
	g.Expect(clientOf(c).Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &imp)).To(Succeed(), "no ServiceImport %s in %s", name, c.Name)
	return &imp
}

// endpointsIn are the addresses of the import's EndpointSlices in a cluster, per source cluster.
func (f mcsFixture) endpointsIn(g Gomega, ctx SpecContext, c *testbed.Cluster, name string) map[string][]string {
	slices, err := c.Clientset.DiscoveryV1().EndpointSlices(f.ns).List(ctx, metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName + "=" + name})
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string][]string{}
	for _, s := range slices.Items {
		g.Expect(s.Labels).To(HaveKeyWithValue(discoveryv1.LabelManagedBy, mcs.ManagedBy))
		for _, e := range s.Endpoints {
			out[s.Labels[mcsv1beta1.LabelSourceCluster]] = append(out[s.Labels[mcsv1beta1.LabelSourceCluster]], e.Addresses...)
		}
	}
	return out
}

// exportCondition is a condition of an export in a cluster, which must be there.
func (f mcsFixture) exportCondition(g Gomega, ctx SpecContext, c *testbed.Cluster, name string, t mcsv1beta1.ServiceExportConditionType) metav1.Condition {
	var e mcsv1beta1.ServiceExport
	g.Expect(clientOf(c).Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &e)).To(Succeed())
	for _, cond := range e.Status.Conditions {
		if cond.Type == string(t) {
			return cond
		}
	}
	g.Expect(e.Status.Conditions).To(ContainElement(HaveField("Type", string(t))), "export %s in %s", name, c.Name)
	return metav1.Condition{}
}

// answers calls the url n times from a pod on a cluster's real node and returns the answers.
func (f mcsFixture) answers(g Gomega, ctx SpecContext, c *testbed.Cluster, url string, n int) string {
	return runInCluster(g, ctx, c, f.ns, fmt.Sprintf("client-%d", time.Now().UnixNano()%1000000), strings.Repeat("wget -qO- "+url+"; ", n))
}
