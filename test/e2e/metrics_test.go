package e2e

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// Every bed cluster serves metrics.k8s.io from a metrics-server on the host (testbed/metrics.go):
// the secondaries' measure kwok's pods (usage from the pods' kwok.x-k8s.io/usage-* annotations),
// the primary's scrapes the virtual nodes, whose kubelet API serves what the secondaries measure.
var _ = Describe("resource metrics of elected pods", Ordered, func() {
	const ns = "metrics"

	BeforeAll(func(ctx SpecContext) {
		joinBothSecondaries(ctx)
		_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{flotillav1.LabelEnabled: "true"}}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
	}, NodeTimeout(2*time.Minute))

	It("serves a proxy's usage to kubectl top pod and an HPA on an elected Deployment, which scales on CPU", func(ctx SpecContext) {
		labels := map[string]string{"app": "busy"}
		deploy := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "busy", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{
						flotillav1.AnnotationElect: "",
						// What each delegate uses, as its secondary's metrics API reports it: twice its request.
						testbed.AnnotationUsageCPU: "200m", testbed.AnnotationUsageMemory: "48Mi"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
				},
			},
		}
		_, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, deploy, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = bed.Primary.Clientset.AppsV1().Deployments(ns).Delete(ctx, "busy", metav1.DeleteOptions{})
			_ = bed.Primary.Clientset.AutoscalingV2().HorizontalPodAutoscalers(ns).Delete(ctx, "busy", metav1.DeleteOptions{})
		})
		var proxy corev1.Pod
		Eventually(func(g Gomega) {
			pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=busy"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(HaveLen(1))
			g.Expect(pods.Items[0].Status.Phase).To(Equal(corev1.PodRunning))
			proxy = pods.Items[0]
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

		// An HPA at 50% of the request: usage is 200%, so it scales to its maximum. Made now, so
		// that its first metrics come with kubectl top's.
		hpa := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "busy", Namespace: ns},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "busy"},
				MinReplicas:    ptr.To[int32](1), MaxReplicas: 3,
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
					Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}},
			},
		}
		_, err = bed.Primary.Clientset.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		hpaCreated := time.Now()

		// kubectl top pod on the proxy: the delegate's usage, as its secondary measured it.
		start := time.Now()
		usage := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(proxy.Name) + `\s+(19\d|20\d)m\s+(4[89]|50)Mi\s*$`)
		Eventually(func(g Gomega) {
			out, err := kubectlIn(ctx, ns, nil, "top", "pod", proxy.Name)
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(MatchRegexp(usage.String()))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("kubectl top pod on a new proxy answers after", time.Since(start).Round(time.Second).String())

		// The Summary API of the proxy's virtual node, at the standard path of its own port: asked
		// directly, as metrics-server does, and through the API server's node proxy.
		out := kubeletGet(ctx, proxy.Spec.NodeName, "/stats/summary")
		Expect(out).To(ContainSubstring(`"name":"` + proxy.Name + `"`))
		out, err = kubectlIn(ctx, "", nil, "get", "--raw", "/api/v1/nodes/"+proxy.Spec.NodeName+"/proxy/stats/summary")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring(`"name":"` + proxy.Name + `"`))
		Expect(out).To(ContainSubstring(`"uid":"` + string(proxy.UID) + `"`))
		// The resource metrics as a kubelet serves them, the pod series beside the containers'.
		out, err = kubectlIn(ctx, "", nil, "get", "--raw", "/api/v1/nodes/"+proxy.Spec.NodeName+"/proxy/metrics/resource")
		Expect(err).NotTo(HaveOccurred(), out)
		for _, series := range []string{"container_cpu_usage_seconds_total", "pod_cpu_usage_seconds_total", "pod_memory_working_set_bytes"} {
			Expect(out).To(MatchRegexp(`(?m)^%s\{(container="[^"]*",)?namespace="%s",pod="%s"\} [0-9.e+]+ [0-9]+$`, series, ns, proxy.Name), series)
		}

		Eventually(func(g Gomega) {
			got, err := bed.Primary.Clientset.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "busy", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Status.CurrentMetrics).NotTo(BeEmpty(), "conditions: %v", got.Status.Conditions)
			// Before its first metrics an HPA reports an entry with no resource.
			g.Expect(got.Status.CurrentMetrics[0].Resource).NotTo(BeNil(), "current metrics: %+v", got.Status.CurrentMetrics)
			g.Expect(got.Status.CurrentMetrics[0].Resource.Current.AverageUtilization).To(HaveValue(BeNumerically("~", 200, 15)))
			d, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Get(ctx, "busy", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("HPA scaled the elected Deployment to 3 after", time.Since(hpaCreated).Round(time.Second).String())
	}, SpecTimeout(6*time.Minute))
})

// Taking a secondary's metrics API away disturbs every spec reading usage there: alone.
var _ = Describe("resource metrics of elected pods", Serial, Label("disruptive"), func() {
	It("reports scrape_error 1 and no pods for a virtual node whose secondary has no metrics API", func(ctx SpecContext) {
		joinBothSecondaries(ctx)
		s2 := bed.Secondaries[1]
		node := flotillav1.VirtualNodeName(s2.Name)
		gvr := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
		dyn, err := dynamic.NewForConfig(s2.RESTConfig)
		Expect(err).NotTo(HaveOccurred())
		apiService, err := dyn.Resource(gvr).Get(ctx, "v1beta1.metrics.k8s.io", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(dyn.Resource(gvr).Delete(ctx, apiService.GetName(), metav1.DeleteOptions{})).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			restored := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiService.GetAPIVersion(), "kind": apiService.GetKind(),
				"metadata": map[string]any{"name": apiService.GetName()}, "spec": apiService.Object["spec"]}}
			_, err := dyn.Resource(gvr).Create(ctx, restored, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		})
		Eventually(func(g Gomega) {
			out := kubeletGet(ctx, node, "/metrics/resource")
			g.Expect(out).To(ContainSubstring("scrape_error 1"))
			g.Expect(strings.Contains(out, "container_cpu_usage_seconds_total{")).To(BeFalse(), out)
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
	}, SpecTimeout(2*time.Minute))
})

// kubeletURLOf is where a virtual node's kubelet API answers: the port its Node advertises.
func kubeletURLOf(ctx SpecContext, node string) string {
	var url string
	Eventually(func(g Gomega) {
		n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		port := n.Status.DaemonEndpoints.KubeletEndpoint.Port
		g.Expect(port).To(BeNumerically(">", 0), "node %s advertises no kubelet port", node)
		url = fmt.Sprintf("https://127.0.0.1:%d", port)
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	return url
}

// kubeletGet reads a path of a virtual node's kubelet API as the bed's admin (its client
// certificate, as the API server and metrics-server present theirs).
func kubeletGet(ctx SpecContext, node, path string) string {
	tlsConfig, err := rest.TLSConfigFor(bed.Primary.RESTConfig)
	Expect(err).NotTo(HaveOccurred())
	tlsConfig.InsecureSkipVerify = true //nolint:gosec // the virtual kubelet's self-signed certificate
	tlsConfig.RootCAs = nil
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, kubeletURLOf(ctx, node)+path, nil)
	Expect(err).NotTo(HaveOccurred())
	resp, err := hc.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
	return string(body)
}
