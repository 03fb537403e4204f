package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// delegatesIn lists this primary's delegates in a namespace of a secondary.
// watchCopies records every ConfigMap and Secret written in ns of c from now on, by kind/name.
// A copy lives only while a delegate uses it (and --dependency-grace after), so a spec that
// looks for it once its pod has ended races its removal.
func watchCopies(ctx SpecContext, c *testbed.Cluster, ns string) func() map[string]runtime.Object {
	var mu sync.Mutex
	seen := map[string]runtime.Object{}
	for kind, start := range map[string]func() (watch.Interface, error){
		"ConfigMap": func() (watch.Interface, error) {
			return c.Clientset.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{})
		},
		"Secret": func() (watch.Interface, error) {
			return c.Clientset.CoreV1().Secrets(ns).Watch(ctx, metav1.ListOptions{})
		},
	} {
		w, err := start()
		Expect(err).NotTo(HaveOccurred(), "watching the %ss of %s in %s", kind, ns, c.Name)
		DeferCleanup(w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				if obj, ok := ev.Object.(metav1.Object); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
					mu.Lock()
					seen[kind+"/"+obj.GetName()] = ev.Object
					mu.Unlock()
				}
			}
		}()
	}
	return func() map[string]runtime.Object {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(seen)
	}
}

func delegatesIn(ctx SpecContext, c *testbed.Cluster, ns string) []corev1.Pod {
	pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: flotillav1.LabelPrimary})
	Expect(err).NotTo(HaveOccurred())
	return pods.Items
}

var _ = Describe("pod election", Ordered, func() {
	const ns = "election"
	BeforeAll(func(ctx SpecContext) {
		joinBothSecondaries(ctx)
		_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{flotillav1.LabelEnabled: "true"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}, NodeTimeout(2*time.Minute))

	It("runs the 10 elected nginx replicas as delegates across both secondaries; scales down; deletes", func(ctx SpecContext) {
		raw, err := os.ReadFile(filepath.Join(repoRoot(), "config", "samples", "elected-nginx.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var deploy appsv1.Deployment
		Expect(yaml.Unmarshal(raw, &deploy)).To(Succeed())
		start := time.Now()
		_, err = bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &deploy, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		Eventually(func(g Gomega) {
			proxies, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=nginx"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(proxies.Items).To(HaveLen(10))
			for _, p := range proxies.Items {
				g.Expect(p.Labels).To(HaveKeyWithValue(flotillav1.LabelProxy, "true"))
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "proxy %s: %s %s", p.Name, p.Status.Reason, p.Status.Message)
				g.Expect(p.Annotations[flotillav1.AnnotationDelegateIP]).NotTo(BeEmpty(), "proxy %s", p.Name)
				if managerPodNetwork() == testbed.PodNetworkFlat {
					g.Expect(p.Status.PodIP).To(Equal(p.Annotations[flotillav1.AnnotationDelegateIP]), "flat networking: the delegate's IP on the proxy")
				} else {
					g.Expect(p.Status.PodIP).To(BeEmpty(), "isolated networking: no pod IP on the proxy")
				}
			}
			total := 0
			for _, c := range bed.Secondaries {
				running := podsInPhase(delegatesIn(ctx, c, ns), corev1.PodRunning)
				g.Expect(running).To(BeNumerically(">", 0), "no delegate runs in %s", c.Name)
				total += running
			}
			g.Expect(total).To(Equal(10))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		AddReportEntry("10 elected replicas Running", time.Since(start).Round(100*time.Millisecond).String())

		// A delegate names its proxy and belongs to this primary's FlotillaPrimary.
		d := delegatesIn(ctx, bed.Secondaries[0], ns)[0]
		Expect(d.Annotations[flotillav1.AnnotationProxyUID]).NotTo(BeEmpty())
		Expect(d.OwnerReferences).To(ContainElement(HaveField("Kind", "FlotillaPrimary")))
		// The primary's token volume is not copied (the secondary injects its own, another name).
		proxy, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, d.Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		for _, v := range proxy.Spec.Volumes {
			if strings.HasPrefix(v.Name, "kube-api-access-") {
				Expect(d.Spec.Volumes).NotTo(ContainElement(HaveField("Name", v.Name)))
			}
		}

		patch := []byte(`{"spec":{"replicas":3}}`)
		_, err = bed.Primary.Clientset.AppsV1().Deployments(ns).Patch(ctx, "nginx", types.MergePatchType, patch, metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() int {
			n := 0
			for _, c := range bed.Secondaries {
				n += len(delegatesIn(ctx, c, ns))
			}
			return n
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Equal(3))

		Expect(bed.Primary.Clientset.AppsV1().Deployments(ns).Delete(ctx, "nginx", metav1.DeleteOptions{})).To(Succeed())
		Eventually(func(g Gomega) {
			proxies, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(proxies.Items).To(BeEmpty())
			for _, c := range bed.Secondaries {
				g.Expect(delegatesIn(ctx, c, ns)).To(BeEmpty(), "delegates left in %s", c.Name)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	}, SpecTimeout(4*time.Minute))

	It("runs a Job with ConfigMap and Secret dependencies in the chosen secondary only, to completion", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		const secretValue = "s3cr3t-value-never-in-a-spec"
		_, err := bed.Primary.Clientset.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "job-config"},
			Data: map[string]string{"MODE": "batch", "settings.ini": "[x]\ny=1\n"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = bed.Primary.Clientset.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "job-secret"},
			StringData: map[string]string{"PASSWORD": secretValue}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		copiesIn2, copiesIn1 := watchCopies(ctx, s2, ns), watchCopies(ctx, s1, ns)
		never := corev1.RestartPolicyNever
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "report"}, Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s2.Name}},
			Spec: corev1.PodSpec{RestartPolicy: never,
				Volumes: []corev1.Volume{{Name: "settings", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "job-config"}}}}},
				Containers: []corev1.Container{{Name: "report", Image: "busybox", Command: []string{"sh", "-c", "echo done"},
					EnvFrom: []corev1.EnvFromSource{
						{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "job-config"}}},
						{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "job-secret"}}}},
					VolumeMounts: []corev1.VolumeMount{{Name: "settings", MountPath: "/etc/report"}}}}}}}}
		_, err = bed.Primary.Clientset.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		Eventually(func(g Gomega) {
			j, err := bed.Primary.Clientset.BatchV1().Jobs(ns).Get(ctx, "report", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			complete := false
			for _, c := range j.Status.Conditions {
				complete = complete || (c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue)
			}
			g.Expect(complete).To(BeTrue(), "Job status %+v", j.Status)
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())

		delegates := delegatesIn(ctx, s2, ns)
		Expect(delegates).To(HaveLen(1))
		Expect(delegates[0].Status.Phase).To(Equal(corev1.PodSucceeded))
		spec, err := json.Marshal(delegates[0].Spec)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(spec)).NotTo(ContainSubstring(secretValue))
		Expect(string(spec)).NotTo(ContainSubstring("batch\""), "ConfigMap values are not inlined either")
		Expect(delegatesIn(ctx, s1, ns)).To(BeEmpty())

		seen := copiesIn2()
		Expect(seen).To(HaveKey("ConfigMap/job-config"), "the ConfigMap is copied to the chosen secondary")
		Expect(seen).To(HaveKey("Secret/job-secret"), "the Secret is copied to the chosen secondary")
		sec := seen["Secret/job-secret"].(*corev1.Secret)
		Expect(string(sec.Data["PASSWORD"])).To(Equal(secretValue))
		Expect(sec.Labels).To(HaveKeyWithValue(flotillav1.LabelPrimary, primaryID(ctx)))
		Expect(copiesIn1()).NotTo(Or(HaveKey("ConfigMap/job-config"), HaveKey("Secret/job-secret")), "nothing is copied where the pod does not run")
		// Its pod has ended: the copies go once --dependency-grace has passed.
		Eventually(func(g Gomega) {
			_, err := s2.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, "job-config", metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the ConfigMap's copy: %v", err)
			_, err = s2.Clientset.CoreV1().Secrets(ns).Get(ctx, "job-secret", metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Secret's copy: %v", err)
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		Expect(bed.Primary.Clientset.BatchV1().Jobs(ns).Delete(ctx, "report", metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationForeground)})).To(Succeed())
		Eventually(func() []corev1.Pod { return delegatesIn(ctx, s2, ns) }).WithContext(ctx).WithTimeout(60 * time.Second).Should(BeEmpty())
	}, SpecTimeout(3*time.Minute))

	It("handles a delegate deleted in its secondary: a ReplicaSet's proxy comes back Running, a bare pod's ends Failed DelegateLost", func(ctx SpecContext) {
		s1 := bed.Secondaries[0]
		one := int32(1)
		sel := map[string]string{"app": "lost"}
		elect := map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s1.Name}
		container := []corev1.Container{{Name: "c", Image: "busybox"}}
		_, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "lost"},
			Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: elect}, Spec: corev1.PodSpec{Containers: container}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Annotations: elect},
			Spec: corev1.PodSpec{Containers: container}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		var first string
		Eventually(func(g Gomega) {
			pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=lost"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(HaveLen(1))
			g.Expect(pods.Items[0].Status.Phase).To(Equal(corev1.PodRunning))
			first = pods.Items[0].Name
			bare, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "bare", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(bare.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

		for _, name := range []string{first, "bare"} {
			Expect(s1.Clientset.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
		}
		Eventually(func(g Gomega) {
			pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=lost"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(HaveLen(1))
			g.Expect(pods.Items[0].Name).NotTo(Equal(first), "the ReplicaSet re-created its pod")
			g.Expect(pods.Items[0].Status.Phase).To(Equal(corev1.PodRunning))
			bare, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "bare", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(bare.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(bare.Status.Reason).To(Equal("DelegateLost"))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

		Expect(bed.Primary.Clientset.AppsV1().Deployments(ns).Delete(ctx, "lost", metav1.DeleteOptions{})).To(Succeed())
		Expect(bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, "bare", metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() []corev1.Pod { return delegatesIn(ctx, s1, ns) }).WithContext(ctx).WithTimeout(60 * time.Second).Should(BeEmpty())
	}, SpecTimeout(3*time.Minute))

	// Failover of a stopped secondary's replicas: the suite's one outage of a secondary (outage_test.go).

	It("shows the secondary's FailedScheduling Event of a delegate its scheduler cannot place on its proxy (kubectl describe), naming the cluster", func(ctx SpecContext) {
		// Two pods that must not share a region, both for secondary1, whose nodes share one: the
		// second's delegate fits the room Flotilla judges (inter-pod anti-affinity is the
		// secondary scheduler's alone), and the secondary's scheduler cannot place it.
		s1 := bed.Secondaries[0]
		apart := func(name string) *corev1.Pod {
			sel := map[string]string{"app": "wide-apart"}
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: sel,
				Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s1.Name}},
				Spec: corev1.PodSpec{Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
						LabelSelector: &metav1.LabelSelector{MatchLabels: sel}, TopologyKey: corev1.LabelTopologyRegion}}}},
					Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
		}
		for _, name := range []string{"apart-1", "apart-2"} {
			DeferCleanup(func(ctx SpecContext) {
				Expect(client.IgnoreNotFound(bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}))).To(Succeed())
			})
		}
		_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, apart("apart-1"), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			d, err := s1.Clientset.CoreV1().Pods(ns).Get(ctx, "apart-1", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Spec.NodeName).NotTo(BeEmpty())
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		_, err = bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, apart("apart-2"), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			out, err := kubectlIn(ctx, ns, nil, "describe", "pod", "apart-2")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(MatchRegexp(`FailedScheduling\s+.*In cluster ` + s1.Name + `: 0/\d+ nodes are available`))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("removes a secondary's namespace Flotilla created once the primary's is deleted, within 2 minutes, and keeps one that also holds a foreign object", func(ctx SpecContext) {
		s1 := bed.Secondaries[0]
		for _, space := range []string{"goes-away", "holds-more"} {
			_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name: space, Labels: map[string]string{flotillav1.LabelEnabled: "true"}}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			_, err = bed.Primary.Clientset.CoreV1().Pods(space).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web",
				Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s1.Name}},
				// 1 s of grace: the primary's namespace controller waits half a pod's grace period
				// between its looks, which would be most of this spec's time.
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](1), Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(s1.Clientset.CoreV1().Namespaces().Delete(ctx, "holds-more", metav1.DeleteOptions{}))).To(Succeed())
		})
		Eventually(func(g Gomega) {
			for _, space := range []string{"goes-away", "holds-more"} {
				g.Expect(podsInPhase(delegatesIn(ctx, s1, space), corev1.PodRunning)).To(Equal(1), "delegate in %s", space)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		// Someone else's ConfigMap beside Flotilla's delegate.
		_, err := s1.Clientset.CoreV1().ConfigMaps("holds-more").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "team-settings"}},
			metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		start := time.Now()
		for _, space := range []string{"goes-away", "holds-more"} {
			Expect(bed.Primary.Clientset.CoreV1().Namespaces().Delete(ctx, space, metav1.DeleteOptions{})).To(Succeed())
		}
		Eventually(func() bool {
			_, err := s1.Clientset.CoreV1().Namespaces().Get(ctx, "goes-away", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(BeTrue())
		AddReportEntry("secondary's namespace gone after the primary's deletion", time.Since(start).Round(100*time.Millisecond).String())
		// The primary's holds-more is gone too, so the manager has looked at its secondary's.
		Eventually(func() bool {
			_, err := bed.Primary.Clientset.CoreV1().Namespaces().Get(ctx, "holds-more", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(BeTrue())
		Consistently(func(g Gomega) {
			n, err := s1.Clientset.CoreV1().Namespaces().Get(ctx, "holds-more", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.DeletionTimestamp).To(BeNil())
			_, err = s1.Clientset.CoreV1().ConfigMaps("holds-more").Get(ctx, "team-settings", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
		}).WithContext(ctx).WithTimeout(6 * time.Second).Should(Succeed())
	}, SpecTimeout(4*time.Minute))

	It("removes a secondary's namespace Flotilla created once nothing has been in it for the dependency grace, and creates it again for the next delegate", func(ctx SpecContext) {
		s1 := bed.Secondaries[0]
		const space = "idle-ns"
		_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: space, Labels: map[string]string{flotillav1.LabelEnabled: "true"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = bed.Primary.Clientset.CoreV1().Namespaces().Delete(ctx, space, metav1.DeleteOptions{})
		})
		elect := func() {
			_, err := bed.Primary.Clientset.CoreV1().Pods(space).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web",
				Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s1.Name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			Eventually(func() int { return podsInPhase(delegatesIn(ctx, s1, space), corev1.PodRunning) }).
				WithContext(ctx).WithTimeout(60 * time.Second).Should(Equal(1))
		}
		elect()
		Expect(bed.Primary.Clientset.CoreV1().Pods(space).Delete(ctx, "web", metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() error {
			_, err := bed.Primary.Clientset.CoreV1().Pods(space).Get(ctx, "web", metav1.GetOptions{})
			return err
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Satisfy(apierrors.IsNotFound))
		// The manager here looks every 10 s and needs two looks at least the grace (2 s) apart.
		start := time.Now()
		Eventually(func() bool {
			_, err := s1.Clientset.CoreV1().Namespaces().Get(ctx, space, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(BeTrue())
		AddReportEntry("idle secondary namespace gone after", time.Since(start).Round(time.Second).String())
		_, err = bed.Primary.Clientset.CoreV1().Namespaces().Get(ctx, space, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the primary's namespace stays")
		elect()
	}, SpecTimeout(5*time.Minute))

	It("copies an Ingress whose backend selects elected pods to the secondaries running them, with its annotations, and removes it there with the last delegate; one that selects none stays home", func(ctx SpecContext) {
		two := int32(2)
		sel := map[string]string{"app": "shop"}
		_, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "shop"},
			Spec: appsv1.DeploymentSpec{Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		for name, selector := range map[string]map[string]string{"shop": sel, "plain": {"app": "not-elected"}} {
			_, err := bed.Primary.Clientset.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			prefix := networkingv1.PathTypePrefix
			_, err = bed.Primary.Clientset.NetworkingV1().Ingresses(ns).Create(ctx, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: name,
				Annotations: map[string]string{"example.com/rewrite-target": "/"}},
				Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: name + ".example",
					IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
						Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
							Name: name, Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		DeferCleanup(func(ctx SpecContext) {
			for _, name := range []string{"shop", "plain"} {
				_ = bed.Primary.Clientset.NetworkingV1().Ingresses(ns).Delete(ctx, name, metav1.DeleteOptions{})
				_ = bed.Primary.Clientset.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{})
			}
			_ = bed.Primary.Clientset.AppsV1().Deployments(ns).Delete(ctx, "shop", metav1.DeleteOptions{})
		})
		// Spread: one replica in each secondary, so the Ingress is in both.
		Eventually(func(g Gomega) {
			for _, c := range bed.Secondaries {
				g.Expect(podsInPhase(delegatesIn(ctx, c, ns), corev1.PodRunning)).To(BeNumerically(">=", 1), "a delegate in %s", c.Name)
				ing, err := c.Clientset.NetworkingV1().Ingresses(ns).Get(ctx, "shop", metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred(), "Ingress shop in %s", c.Name)
				g.Expect(ing.Annotations).To(HaveKeyWithValue("example.com/rewrite-target", "/"))
				g.Expect(ing.Labels).To(HaveKeyWithValue(flotillav1.LabelPrimary, primaryID(ctx)))
				g.Expect(ing.Spec.Rules[0].Host).To(Equal("shop.example"))
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		for _, c := range bed.Secondaries {
			_, err := c.Clientset.NetworkingV1().Ingresses(ns).Get(ctx, "plain", metav1.GetOptions{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Ingress plain, whose backend selects no elected pod, in %s: %v", c.Name, err)
		}

		_, err = bed.Primary.Clientset.AppsV1().Deployments(ns).Patch(ctx, "shop", types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			for _, c := range bed.Secondaries {
				_, err := c.Clientset.NetworkingV1().Ingresses(ns).Get(ctx, "shop", metav1.GetOptions{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Ingress shop still in %s: %v", c.Name, err)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("carries priorityClassName to the delegate (Pending, PriorityClassMissing, until the secondary has the class) and a bare pod's image update", func(ctx SpecContext) {
		s1 := bed.Secondaries[0]
		const class = "flotilla-e2e-high"
		for _, c := range []*testbed.Cluster{bed.Primary, s1} {
			DeferCleanup(func(ctx SpecContext) {
				_ = c.Clientset.SchedulingV1().PriorityClasses().Delete(ctx, class, metav1.DeleteOptions{})
			})
		}
		_, err := bed.Primary.Clientset.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: class}, Value: 1000}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// The primary's Priority admission reads classes from its informer, which may not have the
		// new class yet: it refuses the pod (Forbidden) until it does.
		Eventually(func(g Gomega) {
			_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "prio",
				Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s1.Name}},
				Spec: corev1.PodSpec{PriorityClassName: class, Containers: []corev1.Container{{Name: "c", Image: "nginx:1.26"}}}}, metav1.CreateOptions{})
			if !apierrors.IsAlreadyExists(err) {
				g.Expect(err).NotTo(HaveOccurred())
			}
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			_ = bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, "prio", metav1.DeleteOptions{})
		})
		proxy := func(g Gomega) *corev1.Pod {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "prio", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			return p
		}
		Eventually(func(g Gomega) {
			p := proxy(g)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
			g.Expect(p.Status.Reason).To(Equal(flotillav1.ReasonPriorityClassMissing))
			g.Expect(p.Status.Message).To(ContainSubstring(class))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		_, err = s1.Clientset.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: class}, Value: 500}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			g.Expect(proxy(g).Status.Phase).To(Equal(corev1.PodRunning))
			d, err := s1.Clientset.CoreV1().Pods(ns).Get(ctx, "prio", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Spec.PriorityClassName).To(Equal(class))
			g.Expect(d.Spec.Priority).To(HaveValue(BeEquivalentTo(500)), "the secondary's value of the class")
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

		// kubectl set image on the proxy: the delegate follows.
		out, err := kubectlIn(ctx, ns, nil, "set", "image", "pod/prio", "c=nginx:1.27")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func(g Gomega) {
			d, err := s1.Clientset.CoreV1().Pods(ns).Get(ctx, "prio", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Spec.Containers[0].Image).To(Equal("nginx:1.27"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("steers a controller's replicas: a topologySpreadConstraint on flotilla.dev/cluster (maxSkew 1) ends 5/5, a 70/30 weighted split ends within one replica of 7/3", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		deploy := func(name string, mutate func(*corev1.PodTemplateSpec)) {
			labels := map[string]string{"app": name}
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: appsv1.DeploymentSpec{Replicas: ptrTo(int32(10)), Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}
			mutate(&d.Spec.Template)
			_, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) {
				_ = bed.Primary.Clientset.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{})
			})
		}
		split := func(g Gomega, name string) (int, int) {
			count := func(c *testbed.Cluster) int {
				pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: flotillav1.LabelPrimary + ",app=" + name})
				g.Expect(err).NotTo(HaveOccurred())
				return podsInPhase(pods.Items, corev1.PodRunning)
			}
			a, b := count(s1), count(s2)
			g.Expect(a+b).To(Equal(10), "%s: %d in %s, %d in %s", name, a, s1.Name, b, s2.Name)
			return a, b
		}

		deploy("spread", func(t *corev1.PodTemplateSpec) {
			t.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: flotillav1.LabelCluster,
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
		})
		deploy("weighted", func(t *corev1.PodTemplateSpec) {
			t.Annotations[flotillav1.AnnotationClusterWeights] = s1.Name + "=70," + s2.Name + "=30"
		})
		Eventually(func(g Gomega) {
			a, b := split(g, "spread")
			g.Expect([]int{a, b}).To(Equal([]int{5, 5}))
			a, b = split(g, "weighted")
			g.Expect(a).To(BeNumerically("~", 7, 1), "weighted: %d in %s, %d in %s", a, s1.Name, b, s2.Name)
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())
		// The spread is the primary's scheduler's: the proxies keep the constraint.
		proxies, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=spread"})
		Expect(err).NotTo(HaveOccurred())
		Expect(proxies.Items[0].Spec.TopologySpreadConstraints).To(HaveLen(1))
	}, SpecTimeout(3*time.Minute))

	It("carries an in-place resize of a proxy (kubectl patch --subresource resize) to its delegate", func(ctx SpecContext) {
		s1 := bed.Secondaries[0]
		cpu := func(request, limit string) corev1.ResourceRequirements {
			return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(request)},
				Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(limit)}}
		}
		_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "resizeme",
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s1.Name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx", Resources: cpu("100m", "200m")}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, "resizeme", metav1.DeleteOptions{})
		})
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "resizeme", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].Resources).NotTo(BeNil(), "the delegate's container reports its resources")
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		out, err := kubectlIn(ctx, ns, nil, "patch", "pod", "resizeme", "--subresource", "resize", "--type", "merge", "-p",
			`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"150m"},"limits":{"cpu":"300m"}}}]}}`)
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func(g Gomega) {
			d, err := s1.Clientset.CoreV1().Pods(ns).Get(ctx, "resizeme", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			res := d.Spec.Containers[0].Resources
			g.Expect(res.Requests.Cpu().MilliValue()).To(BeEquivalentTo(150))
			g.Expect(res.Limits.Cpu().MilliValue()).To(BeEquivalentTo(300))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("carries kubectl debug on a proxy to its delegate: the ephemeral container is added there, what its env names copied from the primary, never the secondary's own Secret", func(ctx SpecContext) {
		s1 := bed.Secondaries[0]
		_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "debugme",
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s1.Name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, "debugme", metav1.DeleteOptions{})
		})
		Eventually(func(g Gomega) corev1.PodPhase {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "debugme", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			return p.Status.Phase
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Equal(corev1.PodRunning))
		out, err := kubectlIn(ctx, ns, nil, "debug", "pod/debugme", "--image=busybox", "--container=debugger", "--", "sleep", "30")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func(g Gomega) {
			d, err := s1.Clientset.CoreV1().Pods(ns).Get(ctx, "debugme", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Spec.EphemeralContainers).To(ContainElement(HaveField("Name", "debugger")))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		// What a debug container's env names resolves as for the pod's own containers: copied
		// from the primary, never the secondary's own Secret of that name.
		const theirValue, ourValue = "secondary1-own-value", "primary-debug-value"
		_, err = s1.Clientset.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "theirs"},
			StringData: map[string]string{"token": theirValue}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = s1.Clientset.CoreV1().Secrets(ns).Delete(ctx, "theirs", metav1.DeleteOptions{})
		})
		_, err = bed.Primary.Clientset.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "debug-token"},
			StringData: map[string]string{"token": ourValue}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		secretEnv := func(name, secret string, optional bool) corev1.EnvVar {
			return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: "token", Optional: &optional}}}
		}
		proxy, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "debugme", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		proxy.Spec.EphemeralContainers = append(proxy.Spec.EphemeralContainers,
			corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "peek", Image: "busybox",
				Env: []corev1.EnvVar{secretEnv("THEIRS", "theirs", false)}}},
			corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "tidy", Image: "busybox",
				Env: []corev1.EnvVar{secretEnv("MAYBE", "theirs", true), secretEnv("OURS", "debug-token", false)}}})
		_, err = bed.Primary.Clientset.CoreV1().Pods(ns).UpdateEphemeralContainers(ctx, "debugme", proxy, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			d, err := s1.Clientset.CoreV1().Pods(ns).Get(ctx, "debugme", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			var tidy *corev1.EphemeralContainer
			for i, c := range d.Spec.EphemeralContainers {
				g.Expect(c.Name).NotTo(Equal("peek"), "a required reference to the secondary's own Secret is never added")
				if c.Name == "tidy" {
					tidy = &d.Spec.EphemeralContainers[i]
				}
			}
			g.Expect(tidy).NotTo(BeNil())
			g.Expect(tidy.Env).To(ConsistOf(HaveField("Name", "OURS")), "the optional reference to a Secret not in the primary is dropped")
			evs, err := bed.Primary.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=debugme,reason=" + flotillav1.ReasonWaitingForDependencies})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(evs.Items).To(ContainElement(HaveField("Message", ContainSubstring("Ephemeral container peek waits for Secret theirs"))))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		copied, err := s1.Clientset.CoreV1().Secrets(ns).Get(ctx, "debug-token", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "what the debug container names is copied")
		Expect(string(copied.Data["token"])).To(Equal(ourValue))
		theirs, err := s1.Clientset.CoreV1().Secrets(ns).Get(ctx, "theirs", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(string(theirs.Data["token"])).To(Equal(theirValue), "the secondary's own Secret is left as it was")
	}, SpecTimeout(2*time.Minute))

	It("serves its admission webhook to the API server only: a caller without the API server's client certificate is refused, and the API server's calls still elect pods", func(ctx SpecContext) {
		var cfg admissionregistrationv1.MutatingWebhookConfiguration
		Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Name: "flotilla"}, &cfg)).To(Succeed())
		var url string
		for _, w := range cfg.Webhooks {
			if w.ClientConfig.URL != nil && strings.HasSuffix(*w.ClientConfig.URL, "/mutate-v1-pod") {
				url = *w.ClientConfig.URL
			}
		}
		Expect(url).NotTo(BeEmpty(), "the pods webhook's URL")
		review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","kind":{"group":"","version":"v1","kind":"Pod"},` +
			`"resource":{"group":"","version":"v1","resource":"pods"},"namespace":"` + ns + `","operation":"CREATE","userInfo":{"username":"mallory"},` +
			`"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"direct","annotations":{"flotilla.dev/elect":""}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}}}`
		direct := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the caller under test, not the server
		resp, err := direct.Post(url, "application/json", strings.NewReader(review))
		Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "a direct caller: %s", body)
		Expect(string(body)).NotTo(ContainSubstring("patch"), "nothing admitted for it")

		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "through-the-api-server", Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		Expect(clientOf(bed.Primary).Create(ctx, pod, client.DryRunAll)).To(Succeed())
		Expect(pod.Labels).To(HaveKeyWithValue(flotillav1.LabelProxy, "true"), "the API server's call is served")
	})

	It("serves kubectl logs, exec, attach and port-forward on a proxy from its delegate, and refuses anonymous and unauthorised callers", func(ctx SpecContext) {
		s1 := bed.Secondaries[0]
		_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "talk",
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s1.Name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() (corev1.PodPhase, error) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "talk", metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return p.Status.Phase, nil
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Equal(corev1.PodRunning))

		// Through the primary's API server, as kubectl does.
		Eventually(func() (string, error) {
			raw, err := bed.Primary.Clientset.CoreV1().Pods(ns).GetLogs("talk", &corev1.PodLogOptions{}).DoRaw(ctx)
			return string(raw), err
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(ContainSubstring(testbed.PodLogLine(s1.Name)))
		tools, err := testbed.ToolsDir("")
		Expect(err).NotTo(HaveOccurred())
		out, err := exec.CommandContext(ctx, filepath.Join(tools, "kubectl"), "--kubeconfig", bed.KubeconfigPath, "--context", testbed.PrimaryName,
			"-n", ns, "logs", "talk", "--tail", "1").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(ContainSubstring(testbed.PodLogLine(s1.Name)))
		out, err = exec.CommandContext(ctx, filepath.Join(tools, "kubectl"), "--kubeconfig", bed.KubeconfigPath, "--context", testbed.PrimaryName,
			"-n", ns, "exec", "talk", "--", "echo", "hello-from-the-delegate").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(ContainSubstring("hello-from-the-delegate"))

		// attach: kwok streams what the container prints from the moment the caller is attached.
		attachLog := filepath.Join(GinkgoT().TempDir(), "attach.log")
		attach, err := testbed.StartProcess("attach", filepath.Join(tools, "kubectl"), []string{"--kubeconfig", bed.KubeconfigPath,
			"--context", testbed.PrimaryName, "-n", ns, "attach", "talk", "-c", "c"}, attachLog)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = attach.Stop(5 * time.Second) })
		said := fmt.Sprintf("said while attached %d", time.Now().UnixNano())
		Eventually(func(g Gomega) {
			g.Expect(bed.AppendPodOutput(s1, said)).To(Succeed())
			raw, err := os.ReadFile(attachLog)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(raw)).To(ContainSubstring(said))
		}).WithContext(ctx).WithTimeout(20 * time.Second).WithPolling(time.Second).Should(Succeed())

		// port-forward: kwok forwards the delegate's ports to an echo server of this test.
		echo, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(echo.Close)
		go func() {
			for {
				conn, err := echo.Accept()
				if err != nil {
					return
				}
				go func() { defer conn.Close(); _, _ = io.Copy(conn, conn) }()
			}
		}()
		Expect(testbed.ForwardPorts(ctx, s1, "127.0.0.1", echo.Addr().(*net.TCPAddr).Port)).To(Succeed())
		local, err := testbed.FreePort()
		Expect(err).NotTo(HaveOccurred())
		forward, err := testbed.StartProcess("port-forward", filepath.Join(tools, "kubectl"), []string{"--kubeconfig", bed.KubeconfigPath,
			"--context", testbed.PrimaryName, "-n", ns, "port-forward", "pod/talk", fmt.Sprintf("%d:8080", local)},
			filepath.Join(GinkgoT().TempDir(), "port-forward.log"))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = forward.Stop(5 * time.Second) })
		Eventually(func() (string, error) {
			conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", local), 2*time.Second)
			if err != nil {
				return "", err
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := conn.Write([]byte("ping through the primary\n")); err != nil {
				return "", err
			}
			line, err := bufio.NewReader(conn).ReadString('\n')
			return line, err
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Equal("ping through the primary\n"))

		// Straight to the kubelet port: anonymous, then a token without rights.
		insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the virtual kubelet's self-signed certificate
		}}
		talkKubelet := kubeletURLOf(ctx, flotillav1.VirtualNodeName(s1.Name))
		url := talkKubelet + "/containerLogs/" + ns + "/talk/c"
		Expect(httpStatus(insecure, url)).To(Equal(http.StatusUnauthorized))
		_, err = bed.Primary.Clientset.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		tr, err := bed.Primary.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "nobody", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+tr.Status.Token)
		resp, err := insecure.Do(req)
		Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusForbidden))

		// get nodes/proxy (what a monitoring agent holds) is not exec: a GET upgrade to /exec is
		// refused, since exec needs create pods/exec on the proxy itself.
		_, err = bed.Primary.Clientset.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-nodes-proxy-get"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = bed.Primary.Clientset.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-nodes-proxy-get"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "e2e-nodes-proxy-get"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "nobody"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		execReq, err := http.NewRequestWithContext(ctx, http.MethodGet, talkKubelet+"/exec/"+ns+"/talk/c?command=id&output=1", nil)
		Expect(err).NotTo(HaveOccurred())
		execReq.Header.Set("Authorization", "Bearer "+tr.Status.Token)
		execReq.Header.Set("Connection", "Upgrade")
		execReq.Header.Set("Upgrade", "websocket")
		Eventually(func() (int, error) {
			resp, err := insecure.Do(execReq.Clone(ctx))
			if err != nil {
				return 0, err
			}
			_ = resp.Body.Close()
			return resp.StatusCode, nil
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Equal(http.StatusForbidden))
		Expect(bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, "talk", metav1.DeleteOptions{})).To(Succeed())

		// A pod of the secondary's own with a proxy's name is never streamed from: 404, not its logs.
		_, err = s1.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "twin"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "twin",
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s1.Name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() error {
			_, err := s1.Clientset.CoreV1().Pods(ns).GetLogs("twin", &corev1.PodLogOptions{}).DoRaw(ctx)
			return err
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(), "the secondary's own pod runs and logs")
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "twin", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Status.Reason).To(Equal(flotillav1.ReasonNameConflict), "the conflict is said on the proxy")
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Consistently(func() error {
			raw, err := bed.Primary.Clientset.CoreV1().Pods(ns).GetLogs("twin", &corev1.PodLogOptions{}).DoRaw(ctx)
			if err == nil {
				return fmt.Errorf("the foreign pod's logs were served: %q", raw)
			}
			if !apierrors.IsNotFound(err) && !strings.Contains(err.Error(), "has no delegate") {
				return fmt.Errorf("want 404, got %w", err)
			}
			return nil
		}).WithContext(ctx).WithTimeout(5 * time.Second).Should(Succeed())
		Expect(bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, "twin", metav1.DeleteOptions{})).To(Succeed())
		Expect(s1.Clientset.CoreV1().Pods(ns).Delete(ctx, "twin", metav1.DeleteOptions{})).To(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("lets only the webhook make proxies: forged proxies and edits of a proxy's flotilla.dev/* state are refused, Pod Security carries over", func(ctx SpecContext) {
		s1 := bed.Secondaries[0]
		plain := fmt.Sprintf("plain-%d", time.Now().UnixNano())
		_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, testNamespace(plain), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		forged := func(namespace string) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "forged", Labels: map[string]string{flotillav1.LabelProxy: "true"},
				Annotations: map[string]string{flotillav1.AnnotationDelegateConstraints: `{"hostNetwork":true,"tolerations":[{"operator":"Exists"}]}`}},
				Spec: corev1.PodSpec{NodeName: flotillav1.VirtualNodeName(s1.Name), Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		}
		for _, namespace := range []string{ns, plain} {
			_, err := bed.Primary.Clientset.CoreV1().Pods(namespace).Create(ctx, forged(namespace), metav1.CreateOptions{})
			Expect(err).To(MatchError(ContainSubstring("was not made by Flotilla")), "a forged proxy in %s", namespace)
		}
		// The forgery that got a delegate mounting secondary1's PVC db-data on the demo's bed: the
		// label flotilla.dev/primary made the webhook skip it; the policy now refuses it.
		skipped := forged(ns)
		skipped.Name = "skipped"
		skipped.Labels[flotillav1.LabelPrimary] = "x"
		skipped.Annotations = map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationDelegateConstraints: "{}"}
		skipped.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "db-data"}}}}
		_, err = bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, skipped, metav1.CreateOptions{})
		Expect(err).To(MatchError(ContainSubstring("was not made by Flotilla")), "a forged proxy the webhook skips")
		// With the elect annotation the webhook sees it, and refuses what only Flotilla sets.
		electedForgery := forged(ns)
		electedForgery.Spec.NodeName = ""
		electedForgery.Annotations[flotillav1.AnnotationElect] = ""
		_, err = bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, electedForgery, metav1.CreateOptions{})
		Expect(err).To(MatchError(ContainSubstring("which only Flotilla sets")))

		// A user cannot edit a real proxy's constraints.
		_, err = bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "real",
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s1.Name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = bed.Primary.Clientset.CoreV1().Pods(ns).Patch(ctx, "real", types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"flotilla.dev/delegate-constraints":"{\"hostNetwork\":true}"}}}`), metav1.PatchOptions{})
		Expect(err).To(MatchError(ContainSubstring("set by Flotilla only")))
		for _, c := range bed.Secondaries {
			Expect(delegatesIn(ctx, c, ns)).NotTo(ContainElement(HaveField("ObjectMeta.Name", "forged")), "no forged delegate in %s", c.Name)
			Expect(delegatesIn(ctx, c, ns)).NotTo(ContainElement(HaveField("ObjectMeta.Name", "skipped")), "no forged delegate in %s", c.Name)
		}

		// Pod Security: the namespace's level holds for what the delegate runs.
		for name, level := range map[string]string{"psa-baseline": "baseline", "psa-restricted": "restricted"} {
			_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
				Labels: map[string]string{flotillav1.LabelEnabled: "true", "pod-security.kubernetes.io/enforce": level}}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		_, err = bed.Primary.Clientset.CoreV1().Pods("psa-baseline").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "host",
			Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
			Spec: corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
		Expect(err).To(MatchError(And(ContainSubstring("host namespaces"), ContainSubstring("baseline"))))
		no, yes := false, true
		_, err = bed.Primary.Clientset.CoreV1().Pods("psa-restricted").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "tight",
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s1.Name}},
			Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{{Name: "c", Image: "busybox", SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			n, err := s1.Clientset.CoreV1().Namespaces().Get(ctx, "psa-restricted", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))
			g.Expect(delegatesIn(ctx, s1, "psa-restricted")).To(ContainElement(HaveField("ObjectMeta.Name", "tight")))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(bed.Primary.Clientset.CoreV1().Pods("psa-restricted").Delete(ctx, "tight", metav1.DeleteOptions{})).To(Succeed())
		Expect(bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, "real", metav1.DeleteOptions{})).To(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("never runs a delegate as a ServiceAccount of the secondary's own: Pending with the reason until the namespace opts in", func(ctx SpecContext) {
		s1 := bed.Secondaries[0]
		for _, c := range []*testbed.Cluster{bed.Primary, s1} {
			_, err := c.Clientset.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "ci-deployer"}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred(), "in %s", c.Name)
		}
		_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "deployer",
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s1.Name}},
			Spec: corev1.PodSpec{ServiceAccountName: "ci-deployer", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "deployer", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
			g.Expect(p.Status.Reason).To(Equal(flotillav1.ReasonServiceAccountNotManaged))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(delegatesIn(ctx, s1, ns)).NotTo(ContainElement(HaveField("ObjectMeta.Name", "deployer")))
		_, err = s1.Clientset.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"`+flotillav1.LabelAllowExistingServiceAccounts+`":"true"}}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() []corev1.Pod { return delegatesIn(ctx, s1, ns) }).WithContext(ctx).WithTimeout(45*time.Second).Should(
			ContainElement(HaveField("Spec.ServiceAccountName", "ci-deployer")), "the namespace opted in")
		_, err = s1.Clientset.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"`+flotillav1.LabelAllowExistingServiceAccounts+`":null}}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, "deployer", metav1.DeleteOptions{})).To(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("keeps a tolerate-all DaemonSet off virtual nodes: nothing runs in a secondary and its rolling update completes", func(ctx SpecContext) {
		const name = "agent"
		sel := map[string]string{"app": name}
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				// Not on the bed's real node, where busybox cannot be pulled: the fake nodes stand for the primary's own.
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
						Key: testbed.RealNodeKey, Operator: corev1.NodeSelectorOpDoesNotExist}}}}}}},
				Containers: []corev1.Container{{Name: "agent", Image: "busybox", Env: []corev1.EnvVar{{Name: "V", Value: "1"}}}}}}}}
		_, err := bed.Primary.Clientset.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(bed.Primary.Clientset.AppsV1().DaemonSets(ns).Delete(ctx, name, metav1.DeleteOptions{}))).To(Succeed())
		})
		rolledOut := func(g Gomega) {
			cur, err := bed.Primary.Clientset.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			st := cur.Status
			// kubectl rollout status's own test.
			g.Expect(st.ObservedGeneration).To(BeNumerically(">=", cur.Generation))
			g.Expect(st.DesiredNumberScheduled).To(BeNumerically("==", len(bed.Primary.Nodes)), "only the primary's real nodes are covered")
			g.Expect(st.UpdatedNumberScheduled).To(Equal(st.DesiredNumberScheduled))
			g.Expect(st.NumberAvailable).To(Equal(st.DesiredNumberScheduled))
		}
		Eventually(rolledOut).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		_, err = bed.Primary.Clientset.AppsV1().DaemonSets(ns).Patch(ctx, name, types.StrategicMergePatchType,
			[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"agent","env":[{"name":"V","value":"2"}]}]}}}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		start := time.Now()
		Eventually(rolledOut).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		AddReportEntry("tolerate-all DaemonSet rolled out", time.Since(start).Round(100*time.Millisecond).String())

		pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		Expect(err).NotTo(HaveOccurred())
		for _, p := range pods.Items {
			Expect(p.Spec.NodeName).NotTo(HavePrefix(flotillav1.VirtualNodePrefix), "pod %s", p.Name)
		}
		out, err := flotillactl(ctx, "doctor")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).NotTo(ContainSubstring("daemonset "+ns+"/"+name), "doctor sees the DaemonSet excluded")
		for _, c := range bed.Secondaries {
			there, err := c.Clientset.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
			Expect(err).NotTo(HaveOccurred())
			Expect(there.Items).To(BeEmpty(), "nothing of the DaemonSet runs in %s", c.Name)
		}
	}, SpecTimeout(3*time.Minute))
})

// The election specs that disturb a secondary for every other spec: its controller-manager frozen,
// its context out of the registration, every node of every secondary cordoned, its API server
// frozen. They run alone, after the specs that run in parallel.
var _ = Describe("pod election while a secondary is disturbed", Ordered, Serial, Label("disruptive"), func() {
	const ns = "election-disturbed"
	BeforeAll(func(ctx SpecContext) {
		joinBothSecondaries(ctx)
		enabledNamespace(ctx, ns)
	}, NodeTimeout(2*time.Minute))

	It("never fails a Job pod on a transient error: the secondary's new namespace has no default ServiceAccount yet", func(ctx SpecContext) {
		s2 := bed.Secondaries[1]
		other := fmt.Sprintf("transient-%d", time.Now().Unix())
		_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: other, Labels: map[string]string{flotillav1.LabelEnabled: "true"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// Without its controller-manager, the secondary creates no default ServiceAccount.
		Expect(bed.FreezeComponent(s2, testbed.ControllerManager)).To(Succeed())
		frozen := true
		DeferCleanup(func() {
			if frozen {
				Expect(bed.ThawComponent(s2, testbed.ControllerManager)).To(Succeed())
			}
		})
		never := corev1.RestartPolicyNever
		_, err = bed.Primary.Clientset.BatchV1().Jobs(other).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "patient"},
			Spec: batchv1.JobSpec{BackoffLimit: ptrTo(int32(0)), Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s2.Name}},
				Spec:       corev1.PodSpec{RestartPolicy: never, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		proxy := func(g Gomega) corev1.Pod {
			pods, err := bed.Primary.Clientset.CoreV1().Pods(other).List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(HaveLen(1), "one pod, never replaced")
			return pods.Items[0]
		}
		Eventually(func(g Gomega) {
			p := proxy(g)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
			g.Expect(p.Status.Reason).To(Equal("WaitingForDependencies"))
			g.Expect(p.Status.Message).To(ContainSubstring("default ServiceAccount"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(proxy(g).Status.Phase).To(Equal(corev1.PodPending))
			job, err := bed.Primary.Clientset.BatchV1().Jobs(other).Get(ctx, "patient", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(job.Status.Failed).To(BeZero())
		}).WithContext(ctx).WithTimeout(8 * time.Second).WithPolling(time.Second).Should(Succeed())

		Expect(bed.ThawComponent(s2, testbed.ControllerManager)).To(Succeed())
		frozen = false
		Eventually(func(g Gomega) {
			job, err := bed.Primary.Clientset.BatchV1().Jobs(other).Get(ctx, "patient", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(job.Status.Succeeded).To(BeNumerically("==", 1))
			g.Expect(job.Status.Failed).To(BeZero())
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())
		Expect(bed.Primary.Clientset.CoreV1().Namespaces().Delete(ctx, other, metav1.DeleteOptions{})).To(Succeed())
		Expect(testbed.WaitWorking(ctx, s2)).To(Succeed(), "later specs need the thawed controller-manager working")
	}, SpecTimeout(3*time.Minute))

	It("keeps what runs in a secondary whose context leaves the registration, adopts it when it is back, and never leaves a proxy Running without a delegate", func(ctx SpecContext) {
		s2 := bed.Secondaries[1]
		const space = "unregistered"
		_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: space, Labels: map[string]string{flotillav1.LabelEnabled: "true"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		prepareNamespace(ctx, s2, space)
		two := int32(2)
		sel := map[string]string{"app": "kept"}
		_, err = bed.Primary.Clientset.AppsV1().Deployments(space).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "kept"},
			Spec: appsv1.DeploymentSpec{Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s2.Name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// Every Running proxy has a live delegate of its UID: both sides listed.
		whole := func(g Gomega) {
			proxies, err := bed.Primary.Clientset.CoreV1().Pods(space).List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			delegates := map[string]bool{}
			for _, d := range delegatesIn(ctx, s2, space) {
				if d.DeletionTimestamp == nil {
					delegates[d.Annotations[flotillav1.AnnotationProxyUID]] = true
				}
			}
			running := 0
			for _, p := range proxies.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					running++
					g.Expect(delegates).To(HaveKey(string(p.UID)), "proxy %s is Running without a delegate", p.Name)
				}
			}
			g.Expect(running).To(Equal(2))
		}
		Eventually(whole).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

		// The secondary's context leaves the registration by hand (an older kubeconfig restored, a
		// GitOps revert): nothing there is deleted, its node is cordoned and NotReady with the reason.
		secrets := bed.Primary.Clientset.CoreV1().Secrets(flotillav1.SystemNamespace)
		secret, err := secrets.Get(ctx, flotillav1.KubeconfigSecretName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		registered := secret.Data[flotillav1.KubeconfigSecretKey]
		cfg, err := clientcmd.Load(registered)
		Expect(err).NotTo(HaveOccurred())
		var contextName string
		for name := range cfg.Contexts {
			if strings.Contains(name, s2.Name) {
				contextName = name
			}
		}
		Expect(contextName).NotTo(BeEmpty())
		delete(cfg.Contexts, contextName)
		without, err := clientcmd.Write(*cfg)
		Expect(err).NotTo(HaveOccurred())
		setRegistration := func(raw []byte) {
			Eventually(func() error {
				secret, err := secrets.Get(ctx, flotillav1.KubeconfigSecretName, metav1.GetOptions{})
				if err != nil {
					return err
				}
				secret.Data[flotillav1.KubeconfigSecretKey] = raw
				_, err = secrets.Update(ctx, secret, metav1.UpdateOptions{})
				return err
			}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		}
		delegateUIDs := func() []string {
			var out []string
			for _, d := range delegatesIn(ctx, s2, space) {
				out = append(out, string(d.UID))
			}
			sort.Strings(out)
			return out
		}
		before := delegateUIDs()
		Expect(before).To(HaveLen(2))
		setRegistration(without)
		node := flotillav1.VirtualNodeName(s2.Name)
		Eventually(func(g Gomega) {
			n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred(), "the virtual node stays")
			g.Expect(n.Spec.Taints).To(ContainElement(HaveField("Key", flotillav1.TaintUnregistered)), "cordoned")
			var ready corev1.NodeCondition
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					ready = c
				}
			}
			g.Expect(ready.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(ready.Message).To(ContainSubstring(flotillav1.ReasonNotRegistered))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(delegateUIDs()).To(Equal(before), "the delegates keep running")
			g.Expect(clientOf(s2).Get(ctx, client.ObjectKey{Name: primaryID(ctx)}, &flotillav1.FlotillaPrimary{})).To(Succeed(), "the FlotillaPrimary stays")
		}).WithContext(ctx).WithTimeout(8 * time.Second).Should(Succeed())
		// Back: Ready, uncordoned, the same delegates adopted.
		setRegistration(registered)
		Eventually(func(g Gomega) {
			expectRunningAndReady(g, ctx, s2.Name)
			n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Spec.Taints).NotTo(ContainElement(HaveField("Key", flotillav1.TaintUnregistered)))
			whole(g)
		}).WithContext(ctx).WithTimeout(45 * time.Second).Should(Succeed())
		Expect(delegateUIDs()).To(Equal(before), "the same delegates, adopted")

		// Out again, and its delegates deleted meanwhile (nothing watched them): found when it is back.
		setRegistration(without)
		Eventually(func(g Gomega) {
			n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Spec.Taints).To(ContainElement(HaveField("Key", flotillav1.TaintUnregistered)))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		zero := int64(0)
		for _, d := range delegatesIn(ctx, s2, space) {
			Expect(client.IgnoreNotFound(s2.Clientset.CoreV1().Pods(space).Delete(ctx, d.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))).To(Succeed())
		}
		Eventually(func() []corev1.Pod { return delegatesIn(ctx, s2, space) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(BeEmpty())
		// doctor lists both sides with the user's own contexts and names the loss.
		out, err := flotillactl(ctx, "doctor")
		Expect(err).To(HaveOccurred(), "doctor exits non-zero on a proxy without a delegate:\n%s", out)
		Expect(out).To(MatchRegexp(`ERROR\s+proxy %s/kept-\S+ is Running on %s but %s holds no delegate of it`, space, node, s2.Name))

		setRegistration(registered)
		start := time.Now()
		Eventually(whole).WithContext(ctx).WithTimeout(45 * time.Second).Should(Succeed())
		AddReportEntry("context back to every proxy with a delegate", time.Since(start).Round(100*time.Millisecond).String())
		Eventually(func(g Gomega) {
			out, _ := flotillactl(ctx, "doctor")
			g.Expect(out).NotTo(ContainSubstring("proxy "+space+"/"), "doctor:\n%s", out)
			g.Expect(out).NotTo(ContainSubstring("delegates in "+s2.Name+" not checked"), "doctor:\n%s", out)
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(bed.Primary.Clientset.AppsV1().Deployments(space).Delete(ctx, "kept", metav1.DeleteOptions{})).To(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("keeps an elected Deployment's pods Pending (Unschedulable, a NoClusterFits Event naming each cluster) while every secondary's nodes are cordoned, and runs them within 60 s of the uncordon", func(ctx SpecContext) {
		cordon := func(ctx context.Context, on bool) {
			for _, c := range bed.Secondaries {
				nodes, err := c.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
				Expect(err).NotTo(HaveOccurred())
				for _, n := range nodes.Items {
					_, err := c.Clientset.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType,
						[]byte(fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)), metav1.PatchOptions{})
					Expect(err).NotTo(HaveOccurred())
				}
			}
		}
		cordon(ctx, true)
		DeferCleanup(func(ctx SpecContext) { cordon(ctx, false) })
		// The cordon reaches the virtual nodes: no eligible node, nothing to offer.
		Eventually(func(g Gomega) {
			for _, c := range bed.Secondaries {
				n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, flotillav1.VirtualNodeName(c.Name), metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(n.Status.Allocatable.Pods().IsZero()).To(BeTrue(), "%s offers %s pods", n.Name, n.Status.Allocatable.Pods())
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		three := int32(3)
		sel := map[string]string{"app": "cordoned"}
		_, err := bed.Primary.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cordoned"},
			Spec: appsv1.DeploymentSpec{Replicas: &three, Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=cordoned"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(HaveLen(3), "the ReplicaSet's pods exist: none was refused")
			for _, p := range pods.Items {
				g.Expect(p.Spec.NodeName).To(BeEmpty())
				g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
				g.Expect(p.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.PodScheduled),
					HaveField("Status", corev1.ConditionFalse), HaveField("Reason", corev1.PodReasonUnschedulable))), "pod %s", p.Name)
				evs, err := bed.Primary.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
					FieldSelector: "reason=" + flotillav1.ReasonNoClusterFits + ",involvedObject.name=" + p.Name})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(evs.Items).NotTo(BeEmpty(), "no %s Event on %s", flotillav1.ReasonNoClusterFits, p.Name)
				for _, c := range bed.Secondaries {
					g.Expect(evs.Items[0].Message).To(ContainSubstring(c.Name + ": no eligible node"))
				}
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		evs, err := bed.Primary.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
		Expect(err).NotTo(HaveOccurred())
		for _, e := range evs.Items {
			Expect(e.InvolvedObject.Name).NotTo(HavePrefix("cordoned-"), "a pod of the ReplicaSet was refused: %s", e.Message)
		}

		cordon(ctx, false)
		start := time.Now()
		Eventually(func(g Gomega) int { return runningProxies(ctx, g, ns, "app=cordoned", "") }).
			WithContext(ctx).WithTimeout(60 * time.Second).Should(Equal(3))
		AddReportEntry("Running after the uncordon", time.Since(start).Round(100*time.Millisecond).String())
		Expect(bed.Primary.Clientset.AppsV1().Deployments(ns).Delete(ctx, "cordoned", metav1.DeleteOptions{})).To(Succeed())
		for _, c := range bed.Secondaries {
			Eventually(func() []corev1.Pod { return delegatesIn(ctx, c, ns) }).WithContext(ctx).WithTimeout(60 * time.Second).Should(BeEmpty())
		}
	}, SpecTimeout(4*time.Minute))

	It("never lets a secondary that stops answering slow the others: with 120 proxies terminating on it, a new pod elsewhere gets its delegate within 2 s", func(ctx SpecContext) {
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		const space = "blackhole"
		_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: space, Labels: map[string]string{flotillav1.LabelEnabled: "true"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		prepareNamespace(ctx, s2, space)
		many := int32(120)
		sel := map[string]string{"app": "many"}
		_, err = bed.Primary.Clientset.AppsV1().Deployments(space).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "many"},
			Spec: appsv1.DeploymentSpec{Replicas: &many, Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s2.Name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() int { return podsInPhase(delegatesIn(ctx, s2, space), corev1.PodRunning) }).
			WithContext(ctx).WithTimeout(2 * time.Minute).Should(Equal(int(many)))

		// s2 accepts connections and never answers; its 120 proxies are deleted.
		Expect(bed.Freeze(s2)).To(Succeed())
		DeferCleanup(func() { _ = bed.Thaw(s2) })
		_, err = bed.Primary.Clientset.AppsV1().Deployments(space).Patch(ctx, "many", types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			list, err := bed.Primary.Clientset.CoreV1().Pods(space).List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			terminating := 0
			for _, p := range list.Items {
				if p.DeletionTimestamp != nil {
					terminating++
				}
			}
			g.Expect(terminating).To(Equal(int(many)))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		// Prepared only now: an empty namespace of Flotilla's goes at the next cleanup pass.
		prepareNamespace(ctx, s1, space)
		start := time.Now()
		_, err = bed.Primary.Clientset.CoreV1().Pods(space).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere",
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationClusters: s1.Name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() []corev1.Pod { return delegatesIn(ctx, s1, space) }).WithContext(ctx).WithTimeout(2 * time.Second).
			WithPolling(50 * time.Millisecond).Should(ContainElement(HaveField("ObjectMeta.Name", "elsewhere")))
		AddReportEntry("delegate elsewhere while a secondary hangs", time.Since(start).Round(10*time.Millisecond).String())

		Expect(bed.Thaw(s2)).To(Succeed())
		Expect(testbed.WaitWorking(ctx, s2)).To(Succeed())
		Eventually(func() (int, error) {
			list, err := bed.Primary.Clientset.CoreV1().Pods(space).List(ctx, metav1.ListOptions{LabelSelector: "app=many"})
			if err != nil {
				return 0, err
			}
			return len(list.Items), nil
		}).WithContext(ctx).WithTimeout(2*time.Minute).Should(BeZero(), "the terminating proxies go once their secondary answers")
		Expect(bed.Primary.Clientset.CoreV1().Namespaces().Delete(ctx, space, metav1.DeleteOptions{})).To(Succeed())
	}, SpecTimeout(6*time.Minute))
})

func ptrTo[T any](v T) *T { return &v }
