package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// plumberSample is plumber's own Replicator sample with the bed's secondaries as targets.
func plumberSample(targets ...string) *flotillav1.Replicator {
	raw, err := os.ReadFile(filepath.Join(repoRoot(), "config", "samples", "plumber-replicator.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var rep flotillav1.Replicator
	Expect(yaml.Unmarshal(raw, &rep)).To(Succeed())
	rep.Spec.TargetCluster = targets
	return &rep
}

// kubectlApply applies a manifest to the primary with kubectl, as a user would.
func kubectlApply(ctx context.Context, manifest string) (string, error) {
	return kubectlIn(ctx, "", []byte(manifest), "apply", "-f", "-")
}

func replicatorStatus(ctx context.Context, name string) (*flotillav1.Replicator, error) {
	var rep flotillav1.Replicator
	err := clientOf(bed.Primary).Get(ctx, client.ObjectKey{Name: name}, &rep)
	return &rep, err
}

func certOf(g Gomega, pemBytes []byte) *x509.Certificate {
	block, _ := pem.Decode(pemBytes)
	g.Expect(block).NotTo(BeNil())
	cert, err := x509.ParseCertificate(block.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	return cert
}

var _ = Describe("Replicator", Ordered, func() {
	var all []*testbed.Cluster
	BeforeAll(func(ctx SpecContext) {
		joinBothSecondaries(ctx)
		all = bed.Clusters()
	}, NodeTimeout(2*time.Minute))

	It("applies plumber's sample everywhere within 30 s: synced 3/3, the Service selects the Deployment's pods, one CA for all", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		rep := plumberSample(s1.Name, s2.Name)
		rep.Spec.IngressSpec.Rules = append(rep.Spec.IngressSpec.Rules, networkingv1.IngressRule{Host: "www.example.com"})
		start := time.Now()
		Expect(clientOf(bed.Primary).Create(ctx, rep)).To(Succeed())
		Eventually(func(g Gomega) {
			st, err := replicatorStatus(ctx, rep.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Status.Synced).To(Equal("synced"), "%+v", st.Status.Clusters)
			g.Expect(st.Status.ClusterCount).To(Equal("3/3"))
			for _, c := range all {
				cl := clientOf(c)
				for _, obj := range []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}, &networkingv1.Ingress{}} {
					g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: "test-ns", Name: "nginx"}, obj)).To(Succeed(), "%T in %s", obj, c.Name)
				}
				g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: "test-ns", Name: "ca-secret"}, &corev1.Secret{})).To(Succeed(), "ca-secret in %s", c.Name)
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		AddReportEntry("plumber sample synced in 3 clusters", time.Since(start).Round(100*time.Millisecond).String())

		tools, err := testbed.ToolsDir("")
		Expect(err).NotTo(HaveOccurred())
		out, err := exec.CommandContext(ctx, filepath.Join(tools, "kubectl"), "--kubeconfig", bed.KubeconfigPath, "--context", testbed.PrimaryName,
			"get", "rep").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(And(ContainSubstring("SYNCED"), ContainSubstring("CLUSTERS"), MatchRegexp(`replicator-sample\s+synced\s+3/3`)))

		var caCRTs [][]byte
		for _, c := range all {
			cl := clientOf(c)
			var d appsv1.Deployment
			Expect(cl.Get(ctx, client.ObjectKey{Namespace: "test-ns", Name: "nginx"}, &d)).To(Succeed())
			var svc corev1.Service
			Expect(cl.Get(ctx, client.ObjectKey{Namespace: "test-ns", Name: "nginx"}, &svc)).To(Succeed())
			Expect(svc.Spec.Selector).NotTo(BeEmpty())
			Expect(d.Spec.Selector.MatchLabels).To(Equal(svc.Spec.Selector), "in %s", c.Name)
			for k, v := range svc.Spec.Selector {
				Expect(d.Spec.Template.Labels).To(HaveKeyWithValue(k, v))
			}
			var ns corev1.Namespace
			Expect(cl.Get(ctx, client.ObjectKey{Name: "test-ns"}, &ns)).To(Succeed())
			Expect(ns.Annotations).To(HaveKey(flotillav1.AnnotationCreatedBy))
			if c != bed.Primary {
				var s corev1.Secret
				Expect(cl.Get(ctx, client.ObjectKey{Namespace: "test-ns", Name: "cli-secret"}, &s)).To(MatchError(ContainSubstring("not found")),
					"no client key outside the primary (%s)", c.Name)
				Expect(cl.Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: flotillav1.ReplicatorCASecretName(rep.Name)}, &s)).To(MatchError(ContainSubstring("not found")),
					"no CA key outside the primary (%s)", c.Name)
			}
			var ca corev1.Secret
			Expect(cl.Get(ctx, client.ObjectKey{Namespace: "test-ns", Name: "ca-secret"}, &ca)).To(Succeed())
			Expect(ca.Data).To(HaveKey("tls.crt"))
			Expect(ca.Data).NotTo(HaveKey("ca.key"))
			caCRTs = append(caCRTs, ca.Data["ca.crt"])
			var ing networkingv1.Ingress
			Expect(cl.Get(ctx, client.ObjectKey{Namespace: "test-ns", Name: "nginx"}, &ing)).To(Succeed())
			Expect(ing.Spec.TLS).To(ConsistOf(HaveField("Hosts", ConsistOf("nginx.example.com", "www.example.com"))))
			Expect(ing.Annotations).To(HaveKeyWithValue("nginx.ingress.kubernetes.io/auth-tls-secret", "test-ns/ca-secret"))
			Expect(ing.Annotations).To(HaveKeyWithValue("nginx.ingress.kubernetes.io/auth-tls-verify-client", "on"))
		}
		Expect(caCRTs[1]).To(Equal(caCRTs[0]))
		Expect(caCRTs[2]).To(Equal(caCRTs[0]))

		// The primary's client certificate verifies against secondary1's ca.crt; the server
		// certificate covers every Ingress host.
		var cli, s1CA corev1.Secret
		Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: "test-ns", Name: "cli-secret"}, &cli)).To(Succeed())
		Expect(clientOf(s1).Get(ctx, client.ObjectKey{Namespace: "test-ns", Name: "ca-secret"}, &s1CA)).To(Succeed())
		pool := x509.NewCertPool()
		Expect(pool.AppendCertsFromPEM(s1CA.Data["ca.crt"])).To(BeTrue())
		_, err = certOf(Default, cli.Data["client.crt"]).Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		Expect(err).NotTo(HaveOccurred())
		server := certOf(Default, s1CA.Data["tls.crt"])
		for _, host := range []string{"nginx.example.com", "www.example.com"} {
			_, err := server.Verify(x509.VerifyOptions{Roots: pool, DNSName: host})
			Expect(err).NotTo(HaveOccurred(), host)
		}
	}, SpecTimeout(2*time.Minute))

	It("reverts an edit in a secondary within 5 s, and brings back a Deployment deleted there within 5 s (the drift watch: a resync comes every 30 s)", func(ctx SpecContext) {
		s1 := bed.Secondaries[0]
		_, err := s1.Clientset.CoreV1().ConfigMaps("test-ns").Patch(ctx, "nginx", types.MergePatchType,
			[]byte(`{"data":{"default.conf":"tampered"}}`), metav1.PatchOptions{FieldManager: "intruder"})
		Expect(err).NotTo(HaveOccurred())
		start := time.Now()
		Eventually(func(g Gomega) {
			cm, err := s1.Clientset.CoreV1().ConfigMaps("test-ns").Get(ctx, "nginx", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cm.Data["default.conf"]).To(ContainSubstring("listen 80"))
		}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		AddReportEntry("edit reverted", time.Since(start).Round(100*time.Millisecond).String())

		Expect(s1.Clientset.AppsV1().Deployments("test-ns").Delete(ctx, "nginx", metav1.DeleteOptions{})).To(Succeed())
		start = time.Now()
		Eventually(func() error {
			_, err := s1.Clientset.AppsV1().Deployments("test-ns").Get(ctx, "nginx", metav1.GetOptions{})
			return err
		}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		AddReportEntry("deleted Deployment back", time.Since(start).Round(100*time.Millisecond).String())
	}, SpecTimeout(time.Minute))

	It("brings a configMapData change to every cluster within 10 s", func(ctx SpecContext) {
		patch := []byte(`{"spec":{"configMapData":{"extra.conf":"version 2"}}}`)
		Expect(clientOf(bed.Primary).Patch(ctx, &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: "replicator-sample"}},
			client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		start := time.Now()
		Eventually(func(g Gomega) {
			for _, c := range all {
				cm, err := c.Clientset.CoreV1().ConfigMaps("test-ns").Get(ctx, "nginx", metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(cm.Data).To(HaveKeyWithValue("extra.conf", "version 2"), "in %s", c.Name)
			}
		}).WithContext(ctx).WithTimeout(10 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		AddReportEntry("configMapData change in every cluster", time.Since(start).Round(100*time.Millisecond).String())
	}, SpecTimeout(time.Minute))

	It("writes nothing into its secondaries while nothing changes: their API servers count no apply, patch, create, update or delete of its kinds over a resync once settled", func(ctx SpecContext) {
		s1 := bed.Secondaries[0]
		Eventually(func(g Gomega) {
			rep, err := replicatorStatus(ctx, "replicator-sample")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rep.Status.Synced).To(Equal(flotillav1.SyncedTrue))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		// Idle, nothing: one of the next three windows, each holding a whole resync pass in s1
		// (the e2e manager resyncs every 30 s), must see no write. Before the ledger, every
		// resync applied all 5 objects.
		// Counted in s1's audit log: writes by Flotilla's identity there (the joined
		// ServiceAccount) in the replication namespace. The API server's own request counter
		// also counts other specs' leftovers being cleaned up meanwhile (a namespace of real
		// containers terminating, Flotilla's cleanup of an emptied namespace): those are not the
		// Replicator's.
		var windows []int
		for range 3 {
			start := time.Now()
			// lastSyncTime is written at the end of a pass, after its applies.
			Eventually(func(g Gomega) {
				rep, err := replicatorStatus(ctx, "replicator-sample")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(rep.Status.Clusters).To(ContainElement(And(HaveField("Name", s1.Name),
					HaveField("LastSyncTime.Time", BeTemporally(">", start.Truncate(time.Second))))))
			}).WithContext(ctx).WithTimeout(45 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
			writes := flotillaWrites(s1, "test-ns", start, time.Now())
			windows = append(windows, len(writes))
			if len(writes) == 0 {
				break
			}
			GinkgoWriter.Printf("writes into the idle %s: %v\n", s1.Name, writes)
		}
		AddReportEntry("writes into the idle secondary per resync window", fmt.Sprint(windows))
		Expect(windows).To(ContainElement(0), "writes into an idle secondary, per window holding a resync; the last writers:\n%s",
			lastWriters(ctx, s1, "test-ns"))
	}, SpecTimeout(3*time.Minute))

	// A stopped secondary in a Replicator's status: the suite's one outage of a secondary (outage_test.go).

	It("removes everything it created when deleted, its namespace included, in every cluster", func(ctx SpecContext) {
		Expect(clientOf(bed.Primary).Delete(ctx, &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: "replicator-sample"}})).To(Succeed())
		Eventually(func(g Gomega) {
			_, err := replicatorStatus(ctx, "replicator-sample")
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Replicator still there: %v", err)
			for _, c := range all {
				ns, err := c.Clientset.CoreV1().Namespaces().Get(ctx, "test-ns", metav1.GetOptions{})
				g.Expect(apierrors.IsNotFound(err) || (err == nil && ns.DeletionTimestamp != nil)).To(BeTrue(), "namespace in %s: %v", c.Name, err)
			}
			_, err = bed.Primary.Clientset.CoreV1().Secrets(flotillav1.SystemNamespace).Get(ctx, flotillav1.ReplicatorCASecretName("replicator-sample"), metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "CA Secret: %v", err)
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("takes over a Deployment plumber created with selector apps: nginx", func(ctx SpecContext) {
		const ns = "takeover"
		sel := map[string]string{"apps": "nginx"}
		one := int32(1)
		// plumber's namespace exists before the Replicator: its owner lets Replicators write there.
		takeover := testNamespace(ns)
		takeover.Labels = map[string]string{flotillav1.LabelReplicationAllowed: "true"}
		_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, takeover, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "nginx"},
			Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}}}}}},
			metav1.CreateOptions{FieldManager: "plumber"})
		Expect(err).NotTo(HaveOccurred())
		rep := plumberSample()
		rep.Name, rep.Spec.ReplicationNamespace, rep.Spec.IngressSecureEnabled = "takeover", ns, false
		Expect(clientOf(bed.Primary).Create(ctx, rep)).To(Succeed())
		Eventually(func(g Gomega) {
			st, err := replicatorStatus(ctx, rep.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Status.Synced).To(Equal("synced"), "%+v", st.Status.Clusters)
			d, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Get(ctx, "nginx", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Spec.Selector.MatchLabels).To(Equal(sel), "the live selector is kept")
			g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue("apps", "nginx"))
			g.Expect(d.Spec.Template.Spec.InitContainers).To(HaveLen(1), "the Replicator's template is applied")
			g.Expect(d.Labels).To(HaveKey(flotillav1.LabelReplicator))
			svc, err := bed.Primary.Clientset.CoreV1().Services(ns).Get(ctx, "nginx", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(svc.Spec.Selector).To(Equal(sel), "the Service selects the taken-over pods")
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(clientOf(bed.Primary).Delete(ctx, rep)).To(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("with tls.issuerRef has cert-manager issue in the primary and maps its Secrets to plumber's key names", func(ctx SpecContext) {
		// cert-manager itself (its controller, on the host, against the primary), for this spec only.
		start := time.Now()
		cm, err := testbed.StartCertManager(ctx, bed.Primary, "", filepath.Join(workDir, "cert-manager"))
		Expect(err).NotTo(HaveOccurred())
		cmPID := cm.PID()
		DeferCleanup(func() {
			Expect(cm.Stop(10 * time.Second)).To(Succeed())
			Expect(testbed.ProcessAlive(cmPID)).To(BeFalse(), "cert-manager (pid %d) still running", cmPID)
		})
		AddReportEntry("cert-manager CRDs applied and controller issuing", time.Since(start).Round(100*time.Millisecond).String())

		// The user's namespace, where the Issuers will live; it exists before the Replicator.
		const space = "issued-ns"
		issued := testNamespace(space)
		issued.Labels = map[string]string{flotillav1.LabelReplicationAllowed: "true"} // it exists before the Replicator, which may write there
		_, err = bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, issued, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(bed.Primary.Clientset.CoreV1().Namespaces().Delete(ctx, space, metav1.DeleteOptions{}))).To(Succeed())
		})

		s1 := bed.Secondaries[0]
		rep := plumberSample(s1.Name)
		rep.Name, rep.Spec.ReplicationNamespace = "issued", space
		rep.Spec.TLS = &flotillav1.ReplicatorTLS{IssuerRef: &flotillav1.IssuerRef{Name: "ca-issuer"}}
		Expect(clientOf(bed.Primary).Create(ctx, rep)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(clientOf(bed.Primary).Delete(ctx, rep))).To(Succeed())
		})
		certManagerObject := func(g Gomega, kind, name string) *unstructured.Unstructured {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: kind})
			g.Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: space, Name: name}, u)).To(Succeed())
			return u
		}
		spec := func(u *unstructured.Unstructured) map[string]any {
			s, _, _ := unstructured.NestedMap(u.Object, "spec")
			return s
		}

		// No Issuer named ca-issuer yet: cert-manager cannot issue, the Replicator waits and applies nothing.
		Eventually(func(g Gomega) {
			server := certManagerObject(g, "Certificate", "issued-server")
			g.Expect(spec(server)).To(HaveKeyWithValue("dnsNames", ConsistOf("nginx.example.com")))
			g.Expect(spec(server)).To(HaveKeyWithValue("issuerRef", HaveKeyWithValue("name", "ca-issuer")))
			g.Expect(spec(server)).To(HaveKeyWithValue("secretName", "issued-server-tls"))
			g.Expect(spec(certManagerObject(g, "Certificate", "issued-client"))).To(HaveKeyWithValue("commonName", "issued-client"))
			ready, msg := testbed.CertManagerReady(server)
			g.Expect(ready).To(BeFalse(), msg)
			st, err := replicatorStatus(ctx, rep.Name)
			g.Expect(err).NotTo(HaveOccurred())
			cond := meta.FindStatusCondition(st.Status.Conditions, "Synced")
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Equal("CertificatesPending"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		_, err = s1.Clientset.CoreV1().Secrets(space).Get(ctx, "ca-secret", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing applied while pending: %v", err)

		// A real CA, as a user sets one up: a SelfSigned Issuer issues the CA certificate, a CA Issuer signs with it.
		issuedFrom := time.Now()
		out, err := kubectlApply(ctx, `
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: selfsigned, namespace: issued-ns}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: root-ca, namespace: issued-ns}
spec:
  isCA: true
  commonName: issued-root-ca
  secretName: root-ca
  privateKey: {algorithm: ECDSA, size: 256}
  issuerRef: {name: selfsigned, kind: Issuer}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: ca-issuer, namespace: issued-ns}
spec: {ca: {secretName: root-ca}}
`)
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func(g Gomega) {
			ready, msg := testbed.CertManagerReady(certManagerObject(g, "Issuer", "ca-issuer"))
			g.Expect(ready).To(BeTrue(), "ca-issuer: %s", msg)
			st, err := replicatorStatus(ctx, rep.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Status.Synced).To(Equal("synced"), "%+v", st.Status.Conditions)
			_, err = s1.Clientset.CoreV1().Secrets(space).Get(ctx, "ca-secret", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		AddReportEntry("CA Issuer created to Replicator synced with cert-manager's certificates", time.Since(issuedFrom).Round(100*time.Millisecond).String())

		// cert-manager issued them: its annotations on its Secrets, signed by the CA it issued.
		secretIn := func(c *testbed.Cluster, name string) *corev1.Secret {
			s, err := c.Clientset.CoreV1().Secrets(space).Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred(), "Secret %s in %s", name, c.Name)
			return s
		}
		rootCA := secretIn(bed.Primary, "root-ca")
		serverTLS, clientTLS := secretIn(bed.Primary, "issued-server-tls"), secretIn(bed.Primary, "issued-client-tls")
		for cert, s := range map[string]*corev1.Secret{"issued-server": serverTLS, "issued-client": clientTLS} {
			Expect(s.Annotations).To(And(HaveKeyWithValue("cert-manager.io/issuer-name", "ca-issuer"),
				HaveKeyWithValue("cert-manager.io/issuer-kind", "Issuer"), HaveKeyWithValue("cert-manager.io/certificate-name", cert)))
			Expect(s.Labels).To(HaveKeyWithValue(flotillav1.LabelReplicator, rep.Name), "the Certificate's secretTemplate")
			Expect(s.Data["ca.crt"]).To(Equal(rootCA.Data["tls.crt"]), "%s: ca.crt is the CA cert-manager issued", s.Name)
		}
		pool := x509.NewCertPool()
		Expect(pool.AppendCertsFromPEM(rootCA.Data["tls.crt"])).To(BeTrue())

		// plumber's key names, in every target: ca-secret holds the server pair and ca.crt, and
		// only the primary holds cli-secret (client.crt, client.key).
		for _, c := range []*testbed.Cluster{bed.Primary, s1} {
			ca := secretIn(c, "ca-secret")
			Expect(ca.Data).To(HaveLen(3))
			Expect(ca.Data).To(And(HaveKeyWithValue("tls.crt", serverTLS.Data["tls.crt"]), HaveKeyWithValue("tls.key", serverTLS.Data["tls.key"]),
				HaveKeyWithValue("ca.crt", rootCA.Data["tls.crt"])), "ca-secret in %s", c.Name)
			_, err := tls.X509KeyPair(ca.Data["tls.crt"], ca.Data["tls.key"])
			Expect(err).NotTo(HaveOccurred(), "tls.key belongs to tls.crt in %s", c.Name)
			_, err = certOf(Default, ca.Data["tls.crt"]).Verify(x509.VerifyOptions{Roots: pool, DNSName: "nginx.example.com",
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			Expect(err).NotTo(HaveOccurred(), "the server certificate in %s", c.Name)
		}
		cli := secretIn(bed.Primary, "cli-secret")
		Expect(cli.Data).To(HaveLen(2))
		Expect(cli.Data).To(And(HaveKeyWithValue("client.crt", clientTLS.Data["tls.crt"]), HaveKeyWithValue("client.key", clientTLS.Data["tls.key"])))
		_, err = tls.X509KeyPair(cli.Data["client.crt"], cli.Data["client.key"])
		Expect(err).NotTo(HaveOccurred())
		clientCert := certOf(Default, cli.Data["client.crt"])
		Expect(clientCert.Subject.CommonName).To(Equal("issued-client"))
		_, err = clientCert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		Expect(err).NotTo(HaveOccurred())
		_, err = s1.Clientset.CoreV1().Secrets(space).Get(ctx, "cli-secret", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no client key outside the primary: %v", err)
		if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmPID)); err == nil {
			for line := range strings.SplitSeq(string(status), "\n") {
				if strings.HasPrefix(line, "VmHWM:") || strings.HasPrefix(line, "VmRSS:") {
					AddReportEntry("cert-manager controller "+strings.TrimSuffix(strings.Fields(line)[0], ":"), strings.Join(strings.Fields(line)[1:], " "))
				}
			}
		}

		// Deleted: the Certificates and cert-manager's Secrets go with the Replicator; the namespace
		// existed before it (it holds the user's Issuers), so it is kept in the primary.
		Expect(clientOf(bed.Primary).Delete(ctx, rep)).To(Succeed())
		Eventually(func(g Gomega) {
			_, err := replicatorStatus(ctx, rep.Name)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
			ns, err := s1.Clientset.CoreV1().Namespaces().Get(ctx, space, metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err) || (err == nil && ns.DeletionTimestamp != nil)).To(BeTrue(), "namespace in %s: %v", s1.Name, err)
			for _, name := range []string{"issued-server-tls", "issued-client-tls", "ca-secret", "cli-secret"} {
				_, err := bed.Primary.Clientset.CoreV1().Secrets(space).Get(ctx, name, metav1.GetOptions{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Secret %s in the primary: %v", name, err)
			}
			for _, name := range []string{"issued-server", "issued-client"} {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"})
				err := clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: space, Name: name}, u)
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Certificate %s: %v", name, err)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		ns, err := bed.Primary.Clientset.CoreV1().Namespaces().Get(ctx, space, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(ns.DeletionTimestamp).To(BeNil())
		secretIn(bed.Primary, "root-ca")
	}, SpecTimeout(3*time.Minute))

	It("keeps its ca-secret in a secondary when an elected pod there uses the primary's Secret of that name: reflection neither takes it over nor deletes it", func(ctx SpecContext) {
		s1 := bed.Secondaries[0]
		const space = "shared-ns"
		_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: space, Labels: map[string]string{flotillav1.LabelEnabled: "true", flotillav1.LabelReplicationAllowed: "true"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(bed.Primary.Clientset.CoreV1().Namespaces().Delete(ctx, space, metav1.DeleteOptions{}))).To(Succeed())
		})
		prepareNamespace(ctx, s1, space)
		rep := plumberSample(s1.Name)
		rep.Name, rep.Spec.ReplicationNamespace = "shared", space
		Expect(clientOf(bed.Primary).Create(ctx, rep)).To(Succeed())
		// The Replicator's ca-secret in s1, as it applied it.
		replicators := func(g Gomega) {
			var s corev1.Secret
			g.Expect(clientOf(s1).Get(ctx, client.ObjectKey{Namespace: space, Name: "ca-secret"}, &s)).To(Succeed())
			g.Expect(s.Annotations).To(HaveKeyWithValue(flotillav1.AnnotationOwner, flotillav1.OwnerReplicatorPrefix+rep.Name))
			g.Expect(s.Labels).To(HaveKeyWithValue(flotillav1.LabelReplicator, "shared"))
			for _, m := range s.ManagedFields {
				g.Expect(m.Manager).NotTo(Equal(flotillav1.FieldManagerReflection), "reflection holds no field of it")
			}
		}
		Eventually(func(g Gomega) {
			st, err := replicatorStatus(ctx, rep.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Status.Synced).To(Equal("synced"), "%+v", st.Status.Clusters)
			replicators(g)
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		// A user's elected pod in s1 mounts the primary's ca-secret (the Replicator's there).
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "uses-ca",
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s1.Name}},
			Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "ca", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "ca-secret"}}}},
				Containers: []corev1.Container{{Name: "c", Image: "nginx", VolumeMounts: []corev1.VolumeMount{{Name: "ca", MountPath: "/ca"}}}}}}
		_, err = bed.Primary.Clientset.CoreV1().Pods(space).Create(ctx, pod, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(space).Get(ctx, pod.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		replicators(Default)

		// Unused past the dependency grace period (2 s here): reflection must not remove it.
		Expect(bed.Primary.Clientset.CoreV1().Pods(space).Delete(ctx, pod.Name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() []corev1.Pod { return delegatesIn(ctx, s1, space) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(BeEmpty())
		Consistently(replicators).WithContext(ctx).WithTimeout(6 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

		Expect(clientOf(bed.Primary).Delete(ctx, rep)).To(Succeed())
		Eventually(func(g Gomega) {
			_, err := replicatorStatus(ctx, rep.Name)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
			g.Expect(apierrors.IsNotFound(clientOf(s1).Get(ctx, client.ObjectKey{Namespace: space, Name: "ca-secret"}, &corev1.Secret{}))).To(BeTrue(),
				"the Replicator removes its own")
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("with placement Elect runs the Deployment's pods as delegates across the secondaries and counts them per cluster", func(ctx SpecContext) {
		rep := plumberSample("*")
		rep.Name, rep.Spec.ReplicationNamespace, rep.Spec.IngressSecureEnabled = "elected", "elected-ns", false
		for _, c := range bed.Secondaries {
			prepareNamespace(ctx, c, "elected-ns")
		}
		rep.Spec.Placement = flotillav1.PlacementElect
		six := int32(10)
		rep.Spec.DeploymentSpec.Replicas = &six
		// Both secondaries must be electable (one may have just come back from a stop).
		Eventually(func(g Gomega) {
			for _, c := range bed.Secondaries {
				expectRunningAndReady(g, ctx, c.Name)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		Expect(clientOf(bed.Primary).Create(ctx, rep)).To(Succeed())
		Eventually(func(g Gomega) {
			st, err := replicatorStatus(ctx, rep.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Status.Synced).To(Equal("synced"), "%+v", st.Status.Clusters)
			var ready int32
			for _, c := range st.Status.Clusters {
				if c.Role == flotillav1.RoleSecondary {
					g.Expect(c.ReadyReplicas).To(BeNumerically(">", 0), "no ready replica counted in %s", c.Name)
				}
				ready += c.ReadyReplicas
			}
			g.Expect(ready).To(Equal(six))
			for _, c := range bed.Secondaries {
				g.Expect(podsInPhase(delegatesIn(ctx, c, "elected-ns"), corev1.PodRunning)).To(BeNumerically(">", 0), "in %s", c.Name)
				_, err := c.Clientset.AppsV1().Deployments("elected-ns").Get(ctx, "nginx", metav1.GetOptions{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no Deployment copy in %s with placement Elect", c.Name)
				// One owner per copy: the delegates' reflection or the Replicator, never both.
				cm, err := c.Clientset.CoreV1().ConfigMaps("elected-ns").Get(ctx, "nginx", metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				writers := 0
				for _, m := range cm.ManagedFields {
					if m.Manager == flotillav1.FieldManagerReflection || m.Manager == flotillav1.FieldManagerReplicator {
						writers++
					}
				}
				g.Expect(writers).To(Equal(1), "ConfigMap in %s held by %+v", c.Name, cm.ManagedFields)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		Expect(clientOf(bed.Primary).Delete(ctx, rep)).To(Succeed())
		Eventually(func(g Gomega) {
			for _, c := range bed.Secondaries {
				g.Expect(delegatesIn(ctx, c, "elected-ns")).To(BeEmpty())
				_, err := c.Clientset.CoreV1().ConfigMaps("elected-ns").Get(ctx, "nginx", metav1.GetOptions{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the ConfigMap in %s: removed by whichever writer held it", c.Name)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	}, SpecTimeout(3*time.Minute))
})

// lastWriters says, for each object of the replicated kinds in a namespace, who wrote it last and
// when (its managedFields), so that a write into an idle cluster names its author.
func lastWriters(ctx SpecContext, c *testbed.Cluster, namespace string) string {
	var objs []metav1.Object
	if l, err := c.Clientset.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	}
	if l, err := c.Clientset.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	}
	if l, err := c.Clientset.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	}
	if l, err := c.Clientset.NetworkingV1().Ingresses(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	}
	if l, err := c.Clientset.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	}
	var b strings.Builder
	if l, err := c.Clientset.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
		for _, n := range l.Items {
			if n.Status.Phase == corev1.NamespaceTerminating {
				fmt.Fprintf(&b, "namespace %s is terminating (writes there count too)\n", n.Name)
			}
		}
	}
	for _, o := range objs {
		fmt.Fprintf(&b, "%T %s rv=%s gen=%d:", o, o.GetName(), o.GetResourceVersion(), o.GetGeneration())
		for _, f := range o.GetManagedFields() {
			fmt.Fprintf(&b, " [%s %s %s %s]", f.Manager, f.Operation, f.Subresource, f.Time.Format(time.RFC3339))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// flotillaWrites are the writes (dry runs aside) Flotilla's identity in a secondary (the ServiceAccount join
// made, flotilla-system/flotilla-<id>) made in a namespace between from and to, from the
// secondary's audit log (testbed.Options.AuditWrites): "verb resource/name" each.
func flotillaWrites(c *testbed.Cluster, namespace string, from, to time.Time) []string {
	raw, err := os.ReadFile(c.AuditLogPath())
	Expect(err).NotTo(HaveOccurred(), "the bed's secondaries log their writes (AuditWrites)")
	var out []string
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var ev struct {
			Verb                     string                                                   `json:"verb"`
			RequestURI               string                                                   `json:"requestURI"`
			User                     struct{ Username string }                                `json:"user"`
			ObjectRef                *struct{ Resource, Namespace, Name, Subresource string } `json:"objectRef"`
			RequestReceivedTimestamp metav1.MicroTime                                         `json:"requestReceivedTimestamp"`
		}
		if json.Unmarshal(line, &ev) != nil || ev.ObjectRef == nil || ev.ObjectRef.Namespace != namespace || ev.ObjectRef.Subresource != "" {
			continue
		}
		if strings.Contains(ev.RequestURI, "dryRun=") {
			continue // asks what a write would do, writes nothing
		}
		if !strings.HasPrefix(ev.User.Username, "system:serviceaccount:flotilla-system:flotilla-") {
			continue
		}
		if at := ev.RequestReceivedTimestamp.Time; at.Before(from) || at.After(to) {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s/%s", ev.Verb, ev.ObjectRef.Resource, ev.ObjectRef.Name))
	}
	return out
}

var _ = Describe("Replicators across a manager restart", Ordered, Serial, Label("disruptive"), func() {
	const ns = "restart-copies"

	It("write nothing again that is already as desired: a restarted manager's first pass in each secondary makes no write", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		joinBothSecondaries(ctx)
		two := int32(2)
		rep := &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: "restart-copies"}, Spec: flotillav1.ReplicatorSpec{
			TargetCluster: []string{s1.Name, s2.Name}, ReplicationNamespace: ns,
			ConfigMapName: "settings", ConfigMapData: map[string]string{"mode": "steady"},
			DeploymentName: "web", DeploymentSpec: &flotillav1.ReplicatedDeploymentSpec{Replicas: &two, Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}}}}},
		}}
		Expect(clientOf(bed.Primary).Create(ctx, rep)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = clientOf(bed.Primary).Delete(ctx, rep) })
		// syncedSince waits until each secondary had a whole pass of the Replicator after t.
		syncedSince := func(t time.Time) {
			Eventually(func(g Gomega) {
				got, err := replicatorStatus(ctx, rep.Name)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got.Status.Synced).To(Equal(flotillav1.SyncedTrue))
				for _, c := range []string{s1.Name, s2.Name} {
					g.Expect(got.Status.Clusters).To(ContainElement(And(HaveField("Name", c),
						HaveField("LastSyncTime.Time", BeTemporally(">", t.Truncate(time.Second))))), "cluster %s", c)
				}
			}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		}
		syncedSince(time.Now().Add(-time.Hour))
		for _, c := range []*testbed.Cluster{s1, s2} {
			Eventually(func() error {
				_, err := c.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
				return err
			}).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(), "the copy in %s", c.Name)
		}

		By("the manager restarts: its ledger of what it applied is empty")
		restarted := time.Now()
		restartManager(ctx)
		syncedSince(time.Now())
		for _, c := range []*testbed.Cluster{s1, s2} {
			Expect(flotillaWrites(c, ns, restarted, time.Now())).To(BeEmpty(), "writes in %s after the restart", c.Name)
		}

		By("a change after the restart is still applied")
		changed := time.Now()
		Expect(clientOf(bed.Primary).Patch(ctx, &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: rep.Name}},
			client.RawPatch(types.MergePatchType, []byte(`{"spec":{"configMapData":{"mode":"changed"}}}`)))).To(Succeed())
		for _, c := range []*testbed.Cluster{s1, s2} {
			Eventually(func(g Gomega) {
				cm, err := c.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(cm.Data).To(HaveKeyWithValue("mode", "changed"))
			}).WithContext(ctx).WithTimeout(30*time.Second).WithPolling(500*time.Millisecond).Should(Succeed(), "the change in %s", c.Name)
			Expect(flotillaWrites(c, ns, changed, time.Now())).To(ContainElement("patch configmaps/settings"), "in %s", c.Name)
		}
	})
})
