package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// Each virtual node has a kubelet port of its own (its Node's daemonEndpoints), so the API
// server's node proxy and metrics-server reach a node's own endpoints at the kubelet's standard
// paths; its serving certificate comes from the primary's CSR API (the bed's
// kube-controller-manager signs with kwok's CA).
var _ = Describe("virtual nodes answer like kubelets", Ordered, func() {
	const ns = "kubelet-api"
	var node string

	BeforeAll(func(ctx SpecContext) {
		joinBothSecondaries(ctx)
		node = flotillav1.VirtualNodeName(bed.Secondaries[0].Name)
		_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{flotillav1.LabelEnabled: "true"}}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		for _, p := range []*corev1.Pod{
			electedIn("runs", bed.Secondaries[0].Name, nil),
			// Its Secret is missing: never running on the node, an Event says which.
			electedIn("waits", bed.Secondaries[0].Name, []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{
				Secret: &corev1.SecretVolumeSource{SecretName: "no-such-creds"}}}}),
		} {
			_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		DeferCleanup(func(ctx SpecContext) {
			_ = bed.Primary.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		})
		Eventually(func(g Gomega) {
			runs, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "runs", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(runs.Status.Phase).To(Equal(corev1.PodRunning))
			waits, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "waits", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(waits.Status.Reason).To(Equal(flotillav1.ReasonWaitingForDependencies))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	}, NodeTimeout(3*time.Minute))

	It("lists the node's proxies at /pods, only those whose delegate runs at /runningpods/, and answers /healthz, through the API server's node proxy", func(ctx SpecContext) {
		runs, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "runs", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())

		out, err := kubectlIn(ctx, "", nil, "get", "--raw", "/api/v1/nodes/"+node+"/proxy/pods")
		Expect(err).NotTo(HaveOccurred(), out)
		var pods corev1.PodList
		Expect(json.Unmarshal([]byte(out), &pods)).To(Succeed())
		Expect(pods.Kind).To(Equal("PodList"))
		Expect(pods.APIVersion).To(Equal("v1"))
		Expect(pods.Items).To(ContainElements(
			And(HaveField("Name", "runs"), HaveField("Namespace", ns), HaveField("UID", runs.UID)),
			And(HaveField("Name", "waits"), HaveField("Namespace", ns))))
		for _, p := range pods.Items {
			Expect(p.Spec.NodeName).To(Equal(node), "%s/%s is on another node", p.Namespace, p.Name)
		}

		out, err = kubectlIn(ctx, "", nil, "get", "--raw", "/api/v1/nodes/"+node+"/proxy/runningpods/")
		Expect(err).NotTo(HaveOccurred(), out)
		var running corev1.PodList
		Expect(json.Unmarshal([]byte(out), &running)).To(Succeed())
		Expect(running.Kind).To(Equal("PodList"))
		Expect(running.Items).To(ContainElement(And(HaveField("Name", "runs"), HaveField("Namespace", ns), HaveField("UID", runs.UID),
			HaveField("Spec.Containers", ConsistOf(And(HaveField("Name", "c"), HaveField("Image", "busybox")))))))
		Expect(running.Items).NotTo(ContainElement(HaveField("Name", "waits")), "a pod waiting for its Secret is not running")

		evs, err := bed.Primary.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=waits"})
		Expect(err).NotTo(HaveOccurred())
		Expect(evs.Items).To(ContainElement(And(HaveField("Type", corev1.EventTypeWarning),
			HaveField("Reason", flotillav1.ReasonWaitingForDependencies), HaveField("Message", ContainSubstring("Secret no-such-creds")))))

		out, err = kubectlIn(ctx, "", nil, "get", "--raw", "/api/v1/nodes/"+node+"/proxy/healthz")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(Equal("ok"))

		// The other secondary's node answers for its own pods only.
		other := flotillav1.VirtualNodeName(bed.Secondaries[1].Name)
		out, err = kubectlIn(ctx, "", nil, "get", "--raw", "/api/v1/nodes/"+other+"/proxy/pods")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).NotTo(ContainSubstring(`"name":"runs"`))
	}, SpecTimeout(2*time.Minute))

	It("serves each virtual node a certificate of the primary's CSR API for its address, approved by the manager", func(ctx SpecContext) {
		caPEM, err := os.ReadFile(filepath.Join(bed.Primary.PKIDir(), "ca.crt"))
		Expect(err).NotTo(HaveOccurred())
		roots := x509.NewCertPool()
		Expect(roots.AppendCertsFromPEM(caPEM)).To(BeTrue())
		for _, s := range bed.Secondaries {
			name := flotillav1.VirtualNodeName(s.Name)
			n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(n.Annotations).NotTo(HaveKey("metrics.k8s.io/resource-metrics-path"), "the standard path, at the node's own port")
			var ip string
			for _, a := range n.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					ip = a.Address
				}
			}
			addr := net.JoinHostPort(ip, strconv.Itoa(int(n.Status.DaemonEndpoints.KubeletEndpoint.Port)))
			// Verified as an API server with --kubelet-certificate-authority verifies it: the
			// cluster's CA, the node's address.
			Eventually(func(g Gomega) {
				conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
					&tls.Config{RootCAs: roots, ServerName: ip, MinVersion: tls.VersionTLS12})
				g.Expect(err).NotTo(HaveOccurred())
				defer conn.Close()
				leaf := conn.ConnectionState().PeerCertificates[0]
				g.Expect(leaf.Subject.CommonName).To(Equal("system:node:" + name))
				g.Expect(leaf.Subject.Organization).To(Equal([]string{"system:nodes"}))
			}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
		}
		csrs, err := bed.Primary.Clientset.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(csrs.Items).To(ContainElement(And(
			HaveField("Spec.SignerName", certificatesv1.KubeletServingSignerName),
			HaveField("Spec.Username", "system:serviceaccount:flotilla-system:flotilla"),
			HaveField("Status.Conditions", ContainElement(And(HaveField("Type", certificatesv1.CertificateApproved),
				HaveField("Reason", flotillav1.ReasonVirtualNodeServingCertificate)))),
			HaveField("Status.Certificate", Not(BeEmpty())))))
		evs, err := bed.Primary.Clientset.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: "reason=" + flotillav1.ReasonKubeletCertificateSelfSigned})
		Expect(err).NotTo(HaveOccurred())
		Expect(evs.Items).To(BeEmpty(), "the cluster signs: no node fell back to a self-signed certificate")
	}, SpecTimeout(2*time.Minute))

	It("reaches logs and exec of an elected pod through an API server that checks kubelet certificates against the cluster's CA", func(ctx SpecContext) {
		cfg, stop, err := bed.Primary.StartAPIServer(ctx, filepath.Join(workDir, "kube-apiserver-kubelet-ca.log"),
			"--kubelet-certificate-authority="+filepath.Join(bed.Primary.PKIDir(), "ca.crt"))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(stop()).To(Succeed()) })
		strict, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())

		s1 := bed.Secondaries[0]
		Eventually(func() (string, error) {
			raw, err := strict.CoreV1().Pods(ns).GetLogs("runs", &corev1.PodLogOptions{}).DoRaw(ctx)
			return string(raw), err
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(ContainSubstring(testbed.PodLogLine(s1.Name)))
		out, err := kubectlIn(ctx, ns, nil, "--server", cfg.Host, "exec", "runs", "--", "echo", "hello-through-a-checked-kubelet")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("hello-through-a-checked-kubelet"))
		out, err = kubectlIn(ctx, "", nil, "--server", cfg.Host, "get", "--raw", "/api/v1/nodes/"+node+"/proxy/healthz")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(Equal("ok"))

		// The check is on: the real node's kubelet, whose certificate is its own, is refused by
		// this API server and not by the primary's.
		if bed.RealNode != nil {
			out, err = kubectlIn(ctx, "", nil, "get", "--raw", "/api/v1/nodes/"+bed.RealNode.Name+"/proxy/healthz")
			Expect(err).NotTo(HaveOccurred(), out)
			out, err = kubectlIn(ctx, "", nil, "--server", cfg.Host, "get", "--raw", "/api/v1/nodes/"+bed.RealNode.Name+"/proxy/healthz")
			Expect(err).To(HaveOccurred(), out)
			Expect(strings.ToLower(out)).To(ContainSubstring("certificate"))
		}
	}, SpecTimeout(3*time.Minute))
})

// electedIn is an elected busybox pod bound for one secondary, with volumes.
func electedIn(name, cluster string, volumes []corev1.Volume) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name,
		Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: cluster}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}, Volumes: volumes}}
	for _, v := range volumes {
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: fmt.Sprintf("/mnt/%s", v.Name)})
	}
	return p
}
