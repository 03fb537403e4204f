package e2e

import (
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// Kueue in the primary (built from its module, run by the bed: testbed.StartKueue) queues and
// admits; Flotilla elects what it admits. Each ResourceFlavor names a cluster by the virtual
// nodes' label, so a ClusterQueue's quota per flavor is a quota per cluster. Kwok completes a
// delegate of a Job when its pod-complete delay ends: the Jobs here are held at an hour until a
// spec finishes one by setting its delegates' delay to nothing.
var _ = Describe("batch with Kueue in the primary", Ordered, Serial, Label("disruptive", "kueue"), func() {
	const ns = "batch"
	var s1, s2 *testbed.Cluster

	BeforeAll(func(ctx SpecContext) {
		if why := testbed.KueueRunnable(); why != "" {
			Skip(why)
		}
		s1, s2 = bed.Secondaries[0], bed.Secondaries[1]
		joinBothSecondaries(ctx)
		enabledNamespace(ctx, ns)
		_, err := bed.Primary.Clientset.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"`+testbed.KueueManagedLabel+`":"true"}}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		// MultiKueue reads ClusterProfiles in Kueue's namespace: the one the manager publishes the
		// inventory in for its readers, with the Secrets the secretreader plugin reads there.
		crd, plugin, err := testbed.InventoryFiles("")
		Expect(err).NotTo(HaveOccurred())
		installCRD(ctx, bed.Primary, crd)
		k, err := testbed.StartKueue(ctx, bed.Primary, testbed.KueueOptions{Dir: workDir, Namespace: inventoryReaders,
			FeatureGates: map[string]bool{"MultiKueueClusterProfile": true},
			CredentialsProviders: fmt.Sprintf(`- name: secretreader
  execConfig:
    apiVersion: client.authentication.k8s.io/v1
    command: %s
    env: [{name: KUBECONFIG, value: %s}]
    provideClusterInfo: true
    interactiveMode: Never
`, plugin, readerKubeconfig())})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { Expect(k.Stop(ctx)).To(Succeed()) })
		GinkgoWriter.Printf("Kueue in the primary, log %s\n", k.LogPath)
		applyManifests(ctx, bed.Primary, fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: %[1]s}
spec: {nodeLabels: {%[3]s: %[1]s}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: %[2]s}
spec: {nodeLabels: {%[3]s: %[2]s}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: fleet}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: %[1]s
      resources: [{name: cpu, nominalQuota: 4}]
    - name: %[2]s
      resources: [{name: cpu, nominalQuota: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team, namespace: %[4]s}
spec: {clusterQueue: fleet}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: routine}
value: 100
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: urgent}
value: 1000
`, s1.Name, s2.Name, flotillav1.LabelCluster, ns))
	})

	// job queues a Job of two one-CPU pods in the team's queue, elected, held by kwok until finished.
	job := func(ctx SpecContext, name, priority string) {
		two := int32(2)
		_, err := bed.Primary.Clientset.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{flotillav1.LabelKueueQueueName: "team", "kueue.x-k8s.io/priority-class": priority}},
			Spec: batchv1.JobSpec{Parallelism: &two, Completions: &two, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"e2e.flotilla.dev/job": name}, Annotations: map[string]string{
					flotillav1.AnnotationElect: "", kwokCompleteDelay: "1h", kwokCompleteJitter: "1h"}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
	// running maps each Job whose two proxies are bound to the cluster they are bound to; a Job
	// whose proxies went to two clusters maps to both, comma-separated.
	running := func(g Gomega, ctx SpecContext) map[string]string {
		pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "e2e.flotilla.dev/job"})
		g.Expect(err).NotTo(HaveOccurred())
		where := map[string][]string{}
		for _, p := range pods.Items {
			if c, ok := flotillav1.ClusterOfNode(p.Spec.NodeName); ok && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded {
				where[p.Labels["e2e.flotilla.dev/job"]] = append(where[p.Labels["e2e.flotilla.dev/job"]], c)
			}
		}
		out := map[string]string{}
		for j, cs := range where {
			if len(cs) == 2 {
				slices.Sort(cs)
				out[j] = strings.Join(slices.Compact(cs), ",")
			}
		}
		return out
	}
	suspended := func(g Gomega, ctx SpecContext) []string {
		jobs, err := bed.Primary.Clientset.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		var out []string
		for _, j := range jobs.Items {
			if j.Spec.Suspend != nil && *j.Spec.Suspend {
				out = append(out, j.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	perCluster := func(r map[string]string) map[string]int {
		n := map[string]int{}
		for _, c := range r {
			n[c]++
		}
		return n
	}

	It("admits 4 of 6 Jobs of two one-CPU pods into two flavors of 4 CPUs, 2 per cluster, each elected where its flavor says; a finished Job lets the next in; an urgent Job preempts a routine one, whose delegates go", func(ctx SpecContext) {
		names := []string{"job-0", "job-1", "job-2", "job-3", "job-4", "job-5"}
		for _, n := range names {
			job(ctx, n, "routine")
		}
		var admitted map[string]string
		Eventually(func(g Gomega) {
			admitted = running(g, ctx)
			g.Expect(perCluster(admitted)).To(Equal(map[string]int{s1.Name: 2, s2.Name: 2}), "Jobs running per cluster: %v", admitted)
			g.Expect(suspended(g, ctx)).To(HaveLen(2), "2 Jobs wait in the queue")
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		By("the delegates run where the flavor says, without its node selector")
		for j, c := range admitted {
			cl := map[string]*testbed.Cluster{s1.Name: s1, s2.Name: s2}[c]
			Eventually(func(g Gomega) {
				ds, err := cl.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "e2e.flotilla.dev/job=" + j})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ds.Items).To(HaveLen(2), "Job %s's delegates in %s", j, c)
				for _, d := range ds.Items {
					g.Expect(d.Spec.NodeSelector).NotTo(HaveKey(flotillav1.LabelCluster))
					g.Expect(d.Spec.NodeName).NotTo(BeEmpty())
				}
			}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		}
		Consistently(func(g Gomega) {
			g.Expect(suspended(g, ctx)).To(HaveLen(2))
		}).WithContext(ctx).WithTimeout(3 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("one Job finishes in its cluster: the next in the queue is admitted there")
		var done, doneIn string
		for j, c := range admitted {
			done, doneIn = j, c
			break
		}
		finishPods(ctx, map[string]*testbed.Cluster{s1.Name: s1, s2.Name: s2}[doneIn], ns, "e2e.flotilla.dev/job="+done, 2)
		Eventually(func(g Gomega) {
			j, err := bed.Primary.Clientset.BatchV1().Jobs(ns).Get(ctx, done, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(j.Status.Succeeded).To(BeNumerically("==", 2))
			now := running(g, ctx)
			g.Expect(perCluster(now)).To(Equal(map[string]int{s1.Name: 2, s2.Name: 2}), "Jobs running per cluster: %v", now)
			g.Expect(suspended(g, ctx)).To(HaveLen(1))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("an urgent Job preempts a routine one: its pods and their delegates go, the urgent one runs")
		before := running(Default, ctx)
		job(ctx, "urgent", "urgent")
		var preempted string
		Eventually(func(g Gomega) {
			now := running(g, ctx)
			g.Expect(now).To(HaveKey("urgent"))
			g.Expect(perCluster(now)).To(Equal(map[string]int{s1.Name: 2, s2.Name: 2}), "Jobs running per cluster: %v", now)
			for j := range before {
				if _, still := now[j]; !still {
					preempted = j
				}
			}
			g.Expect(preempted).NotTo(BeEmpty())
			g.Expect(suspended(g, ctx)).To(ContainElement(preempted))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			for _, c := range []*testbed.Cluster{s1, s2} {
				ds, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "e2e.flotilla.dev/job=" + preempted})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ds.Items).To(BeEmpty(), "the preempted Job %s's delegates in %s", preempted, c.Name)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("Job preempted by the urgent one", preempted)
		Expect(bed.Primary.Clientset.BatchV1().Jobs(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)},
			metav1.ListOptions{})).To(Succeed())
		podsGone(ctx, ns, "e2e.flotilla.dev/job")
	})

	It("lets a plain pod and a pod group Kueue admits go to the cluster of their flavor, the group whole as one gang, and run to their end", func(ctx SpecContext) {
		plain := func(name, group string, labels, annotations map[string]string) {
			labels[flotillav1.LabelKueueQueueName], labels["e2e.flotilla.dev/group"] = "team", group
			annotations[flotillav1.AnnotationElect], annotations[kwokCompleteDelay], annotations[kwokCompleteJitter] = "", "1h", "1h"
			_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred(), "pod %s", name)
		}
		// A plain pod Kueue queues: Kueue's webhook gates it after Flotilla's ran, so Flotilla must
		// not have bound it (the API server refuses a gate on a bound pod).
		plain("solo", "solo", map[string]string{}, map[string]string{})
		names := []string{"group-0", "group-1", "group-2", "group-3"}
		for _, n := range names {
			plain(n, "group", map[string]string{flotillav1.LabelKueuePodGroup: "group"}, map[string]string{flotillav1.AnnotationKueuePodGroupTotal: "4"})
		}
		flavors := map[string]string{} // pod -> its flavor's cluster
		Eventually(func(g Gomega) {
			where := map[string]bool{}
			for _, n := range append([]string{"solo"}, names...) {
				p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				flavors[n] = p.Spec.NodeSelector[flotillav1.LabelCluster]
				g.Expect(flavors[n]).NotTo(BeEmpty(), "Kueue's flavor on %s", n)
				c, ok := flotillav1.ClusterOfNode(p.Spec.NodeName)
				g.Expect(ok).To(BeTrue(), "%s bound", n)
				g.Expect(c).To(Equal(flavors[n]), "%s in its flavor's cluster", n)
				if n != "solo" {
					where[c] = true
				}
			}
			g.Expect(where).To(HaveLen(1), "one cluster for the whole group")
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("the pod group's cluster (its flavor), and the plain pod's", flavors["group-0"]+", "+flavors["solo"])
		By("their delegates finish: Kueue finishes their workloads, and the pods go when deleted")
		clusterOf := map[string]*testbed.Cluster{s1.Name: s1, s2.Name: s2}
		finishPods(ctx, clusterOf[flavors["group-0"]], ns, "e2e.flotilla.dev/group=group", 4)
		finishPods(ctx, clusterOf[flavors["solo"]], ns, "e2e.flotilla.dev/group=solo", 1)
		Eventually(func(g Gomega) {
			for _, n := range append([]string{"solo"}, names...) {
				p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded), n)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(bed.Primary.Clientset.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "e2e.flotilla.dev/group"})).To(Succeed())
		podsGone(ctx, ns, "e2e.flotilla.dev/group")
	})

	It("places a plain pod in its flavor's cluster even when that cluster could not take it when the pod was made", func(ctx SpecContext) {
		applyManifests(ctx, bed.Primary, fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: second-only}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: %[1]s
      resources: [{name: cpu, nominalQuota: 2}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: second, namespace: %[2]s}
spec: {clusterQueue: second-only}
`, s2.Name, ns))
		By("secondary2 is cordoned when the pod is made: only secondary1 could take it then")
		setUnschedulable(ctx, s2.Name, true)
		DeferCleanup(func(ctx SpecContext) { setUnschedulable(ctx, s2.Name, false) })
		_, err := bed.Primary.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "late",
			Labels:      map[string]string{flotillav1.LabelKueueQueueName: "second", "e2e.flotilla.dev/group": "late"},
			Annotations: map[string]string{flotillav1.AnnotationElect: ""}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "late", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue(flotillav1.LabelCluster, s2.Name), "Kueue admitted it to secondary2's flavor")
			g.Expect(p.Spec.NodeName).To(BeEmpty())
			g.Expect(p.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring(s2.Name))), "it says why secondary2 does not take it")
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("secondary2 is uncordoned: the pod goes there")
		setUnschedulable(ctx, s2.Name, false)
		Eventually(func(g Gomega) {
			p, err := bed.Primary.Clientset.CoreV1().Pods(ns).Get(ctx, "late", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			c, _ := flotillav1.ClusterOfNode(p.Spec.NodeName)
			g.Expect(c).To(Equal(s2.Name))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(bed.Primary.Clientset.CoreV1().Pods(ns).Delete(ctx, "late", metav1.DeleteOptions{})).To(Succeed())
		podsGone(ctx, ns, "e2e.flotilla.dev/group=late")
	})

	// MultiKueue in the primary, configured from Flotilla's ClusterProfiles alone: secondary1's
	// admin lets the inventory's readers in as MultiKueue (join --consumer-role multikueue) and
	// runs Kueue there (the bed's second Kueue); no kubeconfig is written by hand.
	It("lets MultiKueue, configured from Flotilla's ClusterProfiles alone, dispatch a Job to secondary1, which runs it, its status back in the primary", func(ctx SpecContext) {
		joinSecondary(ctx, s1, "--consumer-role", "multikueue")
		DeferCleanup(func(ctx SpecContext) { joinSecondary(ctx, s1) })
		worker, err := testbed.StartKueue(ctx, s1, testbed.KueueOptions{Dir: workDir})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { Expect(worker.Stop(ctx)).To(Succeed()) })
		// The same namespace on both sides, Kueue's in each (not Flotilla's: nothing is elected
		// here), and on the worker's a queue of the same name as the primary's.
		const ns = "dispatch"
		for _, c := range []*testbed.Cluster{bed.Primary, s1} {
			_, err := c.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
				Labels: map[string]string{testbed.KueueManagedLabel: "true"}}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) {
				Expect(c.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})).To(Succeed())
			})
		}
		applyManifests(ctx, s1, fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: worker}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: remote, namespace: %s}
spec: {clusterQueue: worker}
`, ns))
		By("the manager publishes a token of the readers' own account in secondary1 for them")
		Eventually(func(g Gomega) {
			var secret corev1.Secret
			g.Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: inventoryReaders, Name: "flotilla-" + s1.Name}, &secret)).To(Succeed())
			g.Expect(secret.Annotations).To(HaveKeyWithValue("flotilla.dev/identity", "consumer"))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		applyManifests(ctx, bed.Primary, fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {name: %[1]s}
spec: {clusterSource: {clusterProfileRef: {name: flotilla-%[1]s}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueConfig
metadata: {name: fleet}
spec: {clusters: [%[1]s]}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: dispatch}
spec:
  controllerName: kueue.x-k8s.io/multikueue
  parameters: {apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: fleet}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: anywhere}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: dispatched}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: anywhere
      resources: [{name: cpu, nominalQuota: 4}]
  admissionChecksStrategy:
    admissionChecks: [{name: dispatch}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: remote, namespace: %[2]s}
spec: {clusterQueue: dispatched}
`, s1.Name, ns))
		By("MultiKueue connects to secondary1 from the ClusterProfile and that Secret alone")
		Eventually(func(g Gomega) {
			mk := &unstructured.Unstructured{}
			mk.SetAPIVersion("kueue.x-k8s.io/v1beta2")
			mk.SetKind("MultiKueueCluster")
			g.Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Name: s1.Name}, mk)).To(Succeed())
			g.Expect(conditionStatus(mk, "Active")).To(Equal("True"), "MultiKueueCluster %s: %v", s1.Name, mk.Object["status"])
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

		By("a Job queued in the primary runs in secondary1, and its status comes back")
		one := int32(1)
		// Its pod runs 5 s in the worker (kwok), long enough to see the Job's copy there: MultiKueue
		// removes the copy once the Job is finished.
		_, err = bed.Primary.Clientset.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "far",
			Labels: map[string]string{flotillav1.LabelKueueQueueName: "remote"}},
			Spec: batchv1.JobSpec{Parallelism: &one, Completions: &one, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{kwokCompleteDelay: "5s", kwokCompleteJitter: "5s"}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			remote, err := s1.Clientset.BatchV1().Jobs(ns).Get(ctx, "far", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred(), "the Job's copy in %s", s1.Name)
			g.Expect(remote.Labels).To(HaveKey("kueue.x-k8s.io/prebuilt-workload-name"))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			local, err := bed.Primary.Clientset.BatchV1().Jobs(ns).Get(ctx, "far", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(local.Status.Succeeded).To(BeNumerically("==", 1), "the status that came back")
			wls := &unstructured.UnstructuredList{}
			wls.SetAPIVersion("kueue.x-k8s.io/v1beta2")
			wls.SetKind("WorkloadList")
			g.Expect(clientOf(bed.Primary).List(ctx, wls, client.InNamespace(ns))).To(Succeed())
			g.Expect(wls.Items).To(HaveLen(1))
			where, _, _ := unstructured.NestedString(wls.Items[0].Object, "status", "clusterName")
			g.Expect(where).To(Equal(s1.Name), "the cluster MultiKueue dispatched to")
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=far"})
		Expect(err).NotTo(HaveOccurred())
		Expect(pods.Items).To(BeEmpty(), "no pod of the Job in the primary")
		Expect(bed.Primary.Clientset.BatchV1().Jobs(ns).Delete(ctx, "far", metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)})).To(Succeed())
	})
})

// kwok's pod-complete stage reads these annotations of a pod: a delay equal to its jitter is
// that delay exactly (kwok takes the jitter when it is not above the delay).
const (
	kwokCompleteDelay  = "pod-complete.stage.kwok.x-k8s.io/delay"
	kwokCompleteJitter = "pod-complete.stage.kwok.x-k8s.io/jitter-delay"
)

// podsGone waits until the primary holds no pod a label selector picks in a namespace.
func podsGone(ctx SpecContext, ns, selector string) {
	Eventually(func(g Gomega) {
		pods, err := bed.Primary.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods.Items).To(BeEmpty())
	}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
}

// finishPods lets kwok complete the n delegates a label selector picks in a cluster, once they are
// all there, as if their containers exited 0.
func finishPods(ctx SpecContext, c *testbed.Cluster, ns, selector string, n int) {
	var ds *corev1.PodList
	Eventually(func(g Gomega) {
		var err error
		ds, err = c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ds.Items).To(HaveLen(n), "delegates %s in %s", selector, c.Name)
	}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	for _, d := range ds.Items {
		_, err := c.Clientset.CoreV1().Pods(ns).Patch(ctx, d.Name, types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+kwokCompleteDelay+`":"0s","`+kwokCompleteJitter+`":"0s"}}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
}

// applyManifests creates every object of a multi-document YAML in a cluster; the group's cleanup
// deletes them and waits until they are gone.
func applyManifests(ctx SpecContext, c *testbed.Cluster, manifests string) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	cl := clientOf(c)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			Expect(err.Error()).To(Equal("EOF"))
			break
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		Expect(cl.Create(ctx, u)).To(Succeed(), "%s %s", u.GetKind(), u.GetName())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(cl.Delete(ctx, u))).To(Succeed())
			// Gone before what made it goes: its controller may hold it by a finalizer.
			Eventually(func() error { return cl.Get(ctx, client.ObjectKeyFromObject(u), u.DeepCopy()) }).WithContext(ctx).
				WithTimeout(60*time.Second).Should(MatchError(ContainSubstring("not found")), "%s %s", u.GetKind(), u.GetName())
		})
	}
}
