package election_test

import (
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/controllers/proxy"
	"github.com/flotilla-dev/flotilla/test/integration/clusterenv"
)

// electedPod is a pod asking to be elected, requesting cpu.
func electedPod(name string, annotations map[string]string, cpu string) *corev1.Pod {
	a := map[string]string{flotillav1.AnnotationElect: ""}
	for k, v := range annotations {
		a[k] = v
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: a},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
}

// delegate reads the delegate of a proxy in the secondary.
func delegate(ctx SpecContext, name string) (*corev1.Pod, error) {
	var d corev1.Pod
	err := secondary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d)
	return &d, err
}

func notFound(ctx SpecContext, c client.Client, obj client.Object, name string) func(Gomega) {
	return func(g Gomega) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s: %v", obj, name, err)
	}
}

var _ = Describe("the webhook", func() {
	It("admits a pod no cluster fits now as a waiting proxy that says why per cluster and deletes at once; refuses a pod naming an unknown cluster; leaves other pods alone", func(ctx SpecContext) {
		// Pending, not refused: a ReplicaSet's or Job's pod must exist to wait, as it would for any
		// node. Asking for more CPU than any node has in all, it waits for none of the clusters
		// (the primary's scheduler, seeing a cluster's sum on its virtual node, could bind it where
		// no node ever takes it): it waits gated until a node that can appears.
		huge := electedPod("huge", nil, "1000")
		Expect(primary.Client.Create(ctx, huge)).To(Succeed())
		Expect(huge.Spec.NodeName).To(BeEmpty(), "not bound where it does not fit")
		Expect(huge.Annotations).To(HaveKeyWithValue(flotillav1.AnnotationNoClusterFits,
			And(ContainSubstring(secondary.Name+": node "), ContainSubstring("has in all only cpu"))))
		Expect(huge.Spec.SchedulingGates).To(ContainElement(HaveField("Name", flotillav1.SchedulingGatePlacement)), "waits for no cluster")
		Eventually(func(g Gomega) {
			var evs corev1.EventList
			g.Expect(primary.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			var msgs []string
			for _, e := range evs.Items {
				if e.InvolvedObject.Name == "huge" && e.Reason == flotillav1.ReasonNoClusterFits {
					msgs = append(msgs, e.Message)
				}
			}
			g.Expect(msgs).To(ContainElement(And(ContainSubstring("No cluster can run it as it is"), ContainSubstring(secondary.Name+": "))))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		// Never bound, so never delegated: its deletion waits for nothing (the finalizer once kept
		// it Terminating for ever).
		Expect(primary.Client.Delete(ctx, huge)).To(Succeed())
		Eventually(notFound(ctx, primary.Client, &corev1.Pod{}, "huge")).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())

		err := primary.Client.Create(ctx, electedPod("lost", map[string]string{flotillav1.AnnotationClusters: "atlantis"}, "100m"))
		Expect(err).To(MatchError(ContainSubstring("unknown cluster(s) atlantis")))

		// A trace context is the webhook's to give: one the pod arrives with is dropped (tracing
		// is off in this suite, so the proxy carries none).
		forged := electedPod("forged-trace", map[string]string{flotillav1.AnnotationTraceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, "100m")
		Expect(primary.Client.Create(ctx, forged, client.DryRunAll)).To(Succeed())
		Expect(forged.Labels).To(HaveKey(flotillav1.LabelProxy))
		Expect(forged.Annotations).NotTo(HaveKey(flotillav1.AnnotationTraceparent))

		plain := electedPod("plain", nil, "100m")
		plain.Annotations = nil
		Expect(primary.Client.Create(ctx, plain, client.DryRunAll)).To(Succeed())
		Expect(plain.Labels).NotTo(HaveKey(flotillav1.LabelProxy), "a pod without the annotation is untouched")
		Expect(plain.Finalizers).To(BeEmpty())

		other := fmt.Sprintf("not-enabled-%d", time.Now().UnixNano())
		Expect(primary.Namespace(ctx, other, nil)).To(Succeed())
		untouched := electedPod("elected", nil, "1000")
		untouched.Namespace = other
		Expect(primary.Client.Create(ctx, untouched, client.DryRunAll)).To(Succeed(), "a namespace without the label is not Flotilla's")
		Expect(untouched.Labels).NotTo(HaveKey(flotillav1.LabelProxy))
	}, SpecTimeout(time.Minute))
})

var _ = Describe("placement of a pod no cluster can take", func() {
	It("keeps it unbound and gated, says why without speaking of room, and lets it go once a cluster's node matches", func(ctx SpecContext) {
		pod := electedPod("nowhere", nil, "10m")
		pod.Spec.NodeSelector = map[string]string{"zz": "yes"}
		Expect(primary.Client.Create(ctx, pod)).To(Succeed())
		Expect(pod.Spec.NodeName).To(BeEmpty(), "bound nowhere: no node of any cluster matches")
		Expect(pod.Spec.SchedulingGates).To(ContainElement(HaveField("Name", flotillav1.SchedulingGatePlacement)))
		Expect(pod.Spec.Affinity).To(BeNil(), "no cluster in its choice yet")
		Expect(pod.Annotations).To(HaveKeyWithValue(flotillav1.AnnotationNoClusterFits, ContainSubstring("does not match the pod's node selector")))
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(primary.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
			g.Expect(p.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.PodScheduled), HaveField("Reason", corev1.PodReasonUnschedulable),
				HaveField("Message", ContainSubstring(secondary.Name+": node east-1 does not match")))))
			var evs corev1.EventList
			g.Expect(primary.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			var msgs []string
			for _, e := range evs.Items {
				if e.InvolvedObject.Name == "nowhere" && e.Reason == flotillav1.ReasonNoClusterFits {
					msgs = append(msgs, e.Message)
				}
			}
			g.Expect(msgs).NotTo(BeEmpty())
			g.Expect(msgs).NotTo(ContainElement(ContainSubstring("room")), "room is not what it lacks")
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())

		// A node of the secondary labelled afterwards: the proxy goes there (here no scheduler
		// binds it; its gate goes and its affinity names the cluster that fits).
		var node corev1.Node
		Expect(secondary.Client.Get(ctx, client.ObjectKey{Name: "east-1"}, &node)).To(Succeed())
		base := node.DeepCopy()
		node.Labels["zz"] = "yes"
		Expect(secondary.Client.Patch(ctx, &node, client.MergeFrom(base))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			var n corev1.Node
			Expect(secondary.Client.Get(ctx, client.ObjectKey{Name: "east-1"}, &n)).To(Succeed())
			b := n.DeepCopy()
			delete(n.Labels, "zz")
			Expect(secondary.Client.Patch(ctx, &n, client.MergeFrom(b))).To(Succeed())
		})
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(primary.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
			g.Expect(p.Spec.SchedulingGates).To(BeEmpty())
			g.Expect(p.Spec.Affinity).NotTo(BeNil())
			g.Expect(p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values).
				To(ConsistOf(secondary.Name))
			g.Expect(p.Annotations).NotTo(HaveKey(flotillav1.AnnotationNoClusterFits))
		}).WithContext(ctx).WithTimeout(45 * time.Second).Should(Succeed())
		Expect(primary.Client.Delete(ctx, pod)).To(Succeed())
		Eventually(notFound(ctx, primary.Client, &corev1.Pod{}, "nowhere")).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
	}, SpecTimeout(2*time.Minute))
})

var _ = Describe("the proxy reconciler", func() {
	It("binds an elected pod to the secondary's virtual node, creates its delegate, mirrors its status, and deletes it before the proxy", func(ctx SpecContext) {
		pod := electedPod("web", nil, "100m")
		pod.Labels = map[string]string{"app": "web"}
		pod.Spec.NodeSelector = map[string]string{corev1.LabelOSStable: "linux"}
		Expect(primary.Client.Create(ctx, pod)).To(Succeed())
		Expect(pod.Spec.NodeName).To(Equal(flotillav1.VirtualNodeName(secondary.Name)), "the webhook binds the proxy")
		Expect(pod.Labels).To(HaveKeyWithValue(flotillav1.LabelProxy, "true"))
		Expect(pod.Finalizers).To(ContainElement(flotillav1.FinalizerDelegate))
		Expect(pod.Spec.NodeSelector).To(BeEmpty(), "the user's constraints are the delegate's")

		var d *corev1.Pod
		Eventually(func(g Gomega) {
			var err error
			d, err = delegate(ctx, "web")
			g.Expect(err).NotTo(HaveOccurred())
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(d.Annotations).To(HaveKeyWithValue(flotillav1.AnnotationProxyUID, string(pod.UID)))
		Expect(d.Labels).To(HaveKey(flotillav1.LabelPrimary))
		Expect(d.Labels).To(HaveKeyWithValue("app", "web"))
		Expect(d.Labels).NotTo(HaveKey(flotillav1.LabelProxy))
		Expect(d.Spec.NodeSelector).To(HaveKeyWithValue(corev1.LabelOSStable, "linux"))
		Expect(d.OwnerReferences).To(ConsistOf(HaveField("Kind", "FlotillaPrimary")))

		// What a kubelet in the secondary would report comes back to the proxy.
		d.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.9.0.7", StartTime: &metav1.Time{Time: time.Now()},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		Expect(secondary.Client.Status().Update(ctx, d)).To(Succeed())
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(primary.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(p.Status.PodIP).To(BeEmpty(), "isolated pod network: the IP is an annotation")
			g.Expect(p.Annotations).To(HaveKeyWithValue(flotillav1.AnnotationDelegateIP, "10.9.0.7"))
			g.Expect(p.Status.Conditions).To(ContainElement(And(HaveField("Type", flotillav1.PodConditionDelegated), HaveField("Status", corev1.ConditionTrue))))
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())

		Expect(primary.Client.Delete(ctx, pod)).To(Succeed())
		Eventually(notFound(ctx, secondary.Client, &corev1.Pod{}, "web")).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Eventually(notFound(ctx, primary.Client, &corev1.Pod{}, "web")).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
	}, SpecTimeout(time.Minute))

	It("costs an elected pod that starts one status write and one Event in the primary, no read of it, and one finalizer removal and one delete when it goes", func(ctx SpecContext) {
		pod := electedPod("lean", nil, "10m")
		Expect(primary.Client.Create(ctx, pod)).To(Succeed())
		path := "/api/v1/namespaces/" + ns + "/pods/lean"
		var d *corev1.Pod
		Eventually(func(g Gomega) {
			var err error
			d, err = delegate(ctx, "lean")
			g.Expect(err).NotTo(HaveOccurred())
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())

		// What a secondary's scheduler and kubelet write while the delegate simply starts: bound
		// to a node, scheduled, an IP, its container being created.
		Expect(secondary.Client.SubResource("binding").Create(ctx, d, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "lean"},
			Target: corev1.ObjectReference{Kind: "Node", Name: "east-1"}})).To(Succeed())
		Expect(secondary.Client.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
		d.Status = corev1.PodStatus{Phase: corev1.PodPending, PodIP: "10.9.0.8", Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: "busybox", State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}
		Expect(secondary.Client.Status().Update(ctx, d)).To(Succeed())
		Consistently(func() int { return primaryCalls.get("PATCH " + path + "/status") }).WithContext(ctx).
			WithTimeout(2*time.Second).Should(BeZero(), "progress within Pending waits for the next phase")

		d.Status.Phase = corev1.PodRunning
		d.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		d.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: "busybox", Ready: true, State: corev1.ContainerState{
			Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
		Expect(secondary.Client.Status().Update(ctx, d)).To(Succeed())
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(primary.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(p.Annotations).To(HaveKeyWithValue(flotillav1.AnnotationDelegateIP, "10.9.0.8"))
			g.Expect(p.Status.Conditions).To(ContainElement(And(HaveField("Type", flotillav1.PodConditionDelegated), HaveField("Status", corev1.ConditionTrue))))
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		Consistently(func() int { return primaryCalls.get("PATCH " + path + "/status") }).WithContext(ctx).
			WithTimeout(2*time.Second).Should(Equal(1), "one status write: Running, Delegated and the IP together")
		Expect(primaryCalls.get("GET "+path)).To(BeZero(), "the proxy is read from the cache only")
		var evs corev1.EventList
		Expect(primary.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
		var reasons []string
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == "lean" {
				reasons = append(reasons, e.Reason)
			}
		}
		Expect(reasons).To(ConsistOf(flotillav1.ReasonDelegateCreated), "one Event when nothing goes wrong")

		Expect(primary.Client.Delete(ctx, pod)).To(Succeed())
		// The delegate is bound to a node: it goes when that node's kubelet says its containers
		// stopped (a delete at grace 0), which the spec does in its place.
		Eventually(func(g Gomega) {
			var live corev1.Pod
			g.Expect(secondary.Client.Get(ctx, client.ObjectKeyFromObject(d), &live)).To(Succeed())
			g.Expect(live.DeletionTimestamp).NotTo(BeNil(), "the delegate deleted")
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		Expect(secondary.Client.Delete(ctx, d, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(notFound(ctx, secondary.Client, &corev1.Pod{}, "lean")).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Eventually(notFound(ctx, primary.Client, &corev1.Pod{}, "lean")).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(primaryCalls.get("PATCH "+path)).To(Equal(1), "one finalizer removal")
			g.Expect(primaryCalls.get("DELETE "+path)).To(Equal(1), "one delete at grace 0, as a kubelet's")
			g.Expect(primaryCalls.get("GET " + path)).To(BeZero())
		}).WithContext(ctx).WithTimeout(2 * time.Second).Should(Succeed())
	}, SpecTimeout(time.Minute))

	It("writes Delegated on a proxy whose delegate is still Pending when its quiet start ends, and shows its Events", func(ctx SpecContext) {
		pod := electedPod("slow", nil, "10m")
		Expect(primary.Client.Create(ctx, pod)).To(Succeed())
		var d *corev1.Pod
		Eventually(func(g Gomega) {
			var err error
			d, err = delegate(ctx, "slow")
			g.Expect(err).NotTo(HaveOccurred())
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		created := time.Now()
		// A volume that does not mount: the pod stays ContainerCreating, its kubelet says why in
		// an Event only.
		Expect(secondary.Client.Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow.mount"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "slow", UID: d.UID},
			Type:           corev1.EventTypeWarning, Reason: "FailedMount", Message: "MountVolume.SetUp failed for volume \"data\"",
			Source: corev1.EventSource{Component: "kubelet"}, Count: 1, FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now()})).To(Succeed())
		d.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: "busybox", State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}
		Expect(secondary.Client.Status().Update(ctx, d)).To(Succeed())
		var written time.Duration
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(primary.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
			g.Expect(p.Status.Conditions).To(ContainElement(And(HaveField("Type", flotillav1.PodConditionDelegated), HaveField("Status", corev1.ConditionTrue))))
			written = time.Since(created)
		}).WithContext(ctx).WithTimeout(25 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		AddReportEntry("Delegated written on a Pending proxy after", written.Round(100*time.Millisecond).String())
		// Not before the manager's quiet start ends (written is counted from a moment after the
		// delegate's creation, so up to a poll or two short of it), and at it, not at the default.
		Expect(written).To(BeNumerically(">", quietStart-2*time.Second), "written before the quiet start ended")
		Expect(written).To(BeNumerically("<", proxy.DefaultQuietStart-time.Second), "written at the default quiet start, not the manager's")
		Eventually(func(g Gomega) {
			var evs corev1.EventList
			g.Expect(primary.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			g.Expect(evs.Items).To(ContainElement(And(HaveField("InvolvedObject.Name", "slow"), HaveField("Reason", "FailedMount"),
				HaveField("Message", ContainSubstring("In cluster "+secondary.Name)))))
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		Expect(primary.Client.Delete(ctx, pod)).To(Succeed())
		Eventually(notFound(ctx, primary.Client, &corev1.Pod{}, "slow")).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
	}, SpecTimeout(time.Minute))

	It("keeps a proxy Pending with WaitingForDependencies while its ConfigMap is missing, then creates the delegate", func(ctx SpecContext) {
		pod := electedPod("waits", nil, "10m")
		pod.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "late-config"}}}}
		Expect(primary.Client.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(primary.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
			g.Expect(p.Status.Reason).To(Equal(flotillav1.ReasonWaitingForDependencies))
			g.Expect(p.Status.Message).To(ContainSubstring("late-config"))
			var evs corev1.EventList
			g.Expect(primary.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			g.Expect(evs.Items).To(ContainElement(And(HaveField("InvolvedObject.Name", "waits"), HaveField("Type", corev1.EventTypeWarning),
				HaveField("Reason", flotillav1.ReasonWaitingForDependencies), HaveField("Message", ContainSubstring("ConfigMap late-config")))))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(primary.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late-config"},
			Data: map[string]string{"K": "v"}})).To(Succeed())
		Eventually(func() error { _, err := delegate(ctx, "waits"); return err }).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		var cm corev1.ConfigMap
		Expect(secondary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "late-config"}, &cm)).To(Succeed())
		Expect(cm.Data).To(HaveKeyWithValue("K", "v"))
		Expect(primary.Client.Delete(ctx, pod)).To(Succeed())
		Eventually(notFound(ctx, primary.Client, &corev1.Pod{}, "waits")).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
	}, SpecTimeout(time.Minute))

	It("gives no delegate to a proxy the webhook did not seal: the forged pod of the demo's bed is Failed, NotAdmitted, with an Event", func(ctx SpecContext) {
		// Labelled flotilla.dev/primary, the webhook skips it; no admission policy runs in this
		// suite, so only the reconciler stands between it and the secondary's PVC db-data.
		forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged",
			Labels: map[string]string{flotillav1.LabelPrimary: "x", flotillav1.LabelProxy: "true"},
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationDelegateConstraints: "{}",
				flotillav1.AnnotationSeal: "v1.n.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
			Finalizers: []string{flotillav1.FinalizerDelegate}},
			Spec: corev1.PodSpec{NodeName: flotillav1.VirtualNodeName(secondary.Name), Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "db-data"}}}}}}
		Expect(primary.Client.Create(ctx, forged)).To(Succeed())
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(primary.Client.Get(ctx, client.ObjectKeyFromObject(forged), &p)).To(Succeed())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.Reason).To(Equal(flotillav1.ReasonNotAdmitted))
			g.Expect(p.Status.Message).To(ContainSubstring("seal"))
			var evs corev1.EventList
			g.Expect(primary.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			g.Expect(evs.Items).To(ContainElement(And(HaveField("InvolvedObject.Name", "forged"), HaveField("Reason", flotillav1.ReasonNotAdmitted),
				HaveField("Type", corev1.EventTypeWarning))))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Consistently(notFound(ctx, secondary.Client, &corev1.Pod{}, "forged")).WithContext(ctx).WithTimeout(3*time.Second).Should(Succeed(), "no delegate")
		Expect(primary.Client.Delete(ctx, forged)).To(Succeed())
		Eventually(notFound(ctx, primary.Client, &corev1.Pod{}, "forged")).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
	}, SpecTimeout(time.Minute))

	It("never gives a delegate the secondary's own claim of the name it uses: it waits for the claim, then for Flotilla's real claim of it, and runs on that", func(ctx SpecContext) {
		// Another team's claim in the opted-in namespace of the secondary.
		theirs := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-data"},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		Expect(secondary.Client.Create(ctx, theirs)).To(Succeed())
		pod := electedPod("wants-data", nil, "10m")
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "team-data"}}}}
		// Admitted as Kubernetes admits a pod whose claim does not exist yet.
		Expect(primary.Client.Create(ctx, pod)).To(Succeed())
		waits := func(reason, message string) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				var p corev1.Pod
				g.Expect(primary.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
				g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
				g.Expect(p.Status.Reason).To(Equal(reason))
				g.Expect(p.Status.Message).To(ContainSubstring(message))
			}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
			Consistently(notFound(ctx, secondary.Client, &corev1.Pod{}, "wants-data")).WithContext(ctx).WithTimeout(2*time.Second).Should(Succeed(), "no delegate")
		}
		waits(flotillav1.ReasonWaitingForClaim, "Waiting for claim team-data in the primary")

		// Its claim, of class flotilla: the secondary's claim of that name is not Flotilla's.
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-data"},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(flotillav1.StorageClassRemote),
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		Expect(primary.Client.Create(ctx, claim)).To(Succeed())
		waits(flotillav1.ReasonNameConflict, "has a claim team-data that is not Flotilla's")

		// Gone there (no controller-manager here releases its pvc-protection finalizer: done as it
		// would), Flotilla makes its real claim, and the delegate runs on it.
		Expect(secondary.Client.Delete(ctx, theirs)).To(Succeed())
		Expect(secondary.Client.Get(ctx, client.ObjectKeyFromObject(theirs), theirs)).To(Succeed())
		theirs.Finalizers = nil
		Expect(secondary.Client.Update(ctx, theirs)).To(Succeed())
		Eventually(notFound(ctx, secondary.Client, &corev1.PersistentVolumeClaim{}, "team-data")).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			d, err := delegate(ctx, "wants-data")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Spec.Volumes).To(ContainElement(HaveField("PersistentVolumeClaim.ClaimName", "team-data")))
			var real corev1.PersistentVolumeClaim
			g.Expect(secondary.Client.Get(ctx, client.ObjectKeyFromObject(claim), &real)).To(Succeed())
			g.Expect(real.Annotations).To(HaveKeyWithValue(flotillav1.AnnotationClaimUID, string(claim.UID)))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(primary.Client.Delete(ctx, pod)).To(Succeed())
		Eventually(notFound(ctx, primary.Client, &corev1.Pod{}, "wants-data")).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(primary.Client.Delete(ctx, claim)).To(Succeed())
		release := func(c client.Client) func(Gomega) {
			return func(g Gomega) {
				var pvc corev1.PersistentVolumeClaim
				err := c.Get(ctx, client.ObjectKeyFromObject(claim), &pvc)
				if apierrors.IsNotFound(err) {
					return
				}
				g.Expect(err).NotTo(HaveOccurred())
				if !pvc.DeletionTimestamp.IsZero() && slices.Contains(pvc.Finalizers, "kubernetes.io/pvc-protection") {
					pvc.Finalizers = slices.DeleteFunc(pvc.Finalizers, func(f string) bool { return f == "kubernetes.io/pvc-protection" })
					g.Expect(c.Update(ctx, &pvc)).To(Succeed())
				}
				g.Expect(c.Get(ctx, client.ObjectKeyFromObject(claim), &pvc)).To(Satisfy(apierrors.IsNotFound), "claim still there: %v", pvc.Finalizers)
			}
		}
		Eventually(release(secondary.Client)).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Eventually(release(primary.Client)).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("never gives a delegate to a proxy whose mandatory Secret is missing, says which in an Event, and lets optional ones be missing", func(ctx SpecContext) {
		yes := true
		pod := electedPod("needs-secret", nil, "10m")
		// Optional: missing, they hold nothing up; the mandatory volume's Secret does.
		pod.Spec.Volumes = []corev1.Volume{
			{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db-creds"}}},
			{Name: "extra", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "no-such-config"}, Optional: &yes}}},
		}
		pod.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "no-such-secret"}, Optional: &yes}}}
		Expect(primary.Client.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(primary.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
			g.Expect(p.Status.Reason).To(Equal(flotillav1.ReasonWaitingForDependencies))
			g.Expect(p.Status.Message).To(Equal("Waiting for Secret db-creds: it does not exist in the primary"))
			var evs corev1.EventList
			g.Expect(primary.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			g.Expect(evs.Items).To(ContainElement(And(HaveField("InvolvedObject.Name", "needs-secret"), HaveField("Type", corev1.EventTypeWarning),
				HaveField("Reason", flotillav1.ReasonWaitingForDependencies), HaveField("Message", ContainSubstring("Secret db-creds")))))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Consistently(func() error { _, err := delegate(ctx, "needs-secret"); return err }).WithContext(ctx).
			WithTimeout(2*time.Second).Should(MatchError(ContainSubstring("not found")), "no delegate without its Secret")
		Expect(primary.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-creds"},
			StringData: map[string]string{"password": "p"}})).To(Succeed())
		var d *corev1.Pod
		Eventually(func() (err error) {
			d, err = delegate(ctx, "needs-secret")
			return err
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(), "the optional references, missing, hold nothing up")
		Expect(d.Spec.Containers[0].EnvFrom).To(BeEmpty(), "the missing optional Secret's reference is dropped")
		Expect(primary.Client.Delete(ctx, pod)).To(Succeed())
		Eventually(notFound(ctx, primary.Client, &corev1.Pod{}, "needs-secret")).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(primary.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-creds"}})).To(Succeed())
	}, SpecTimeout(time.Minute))

	It("never lets a delegate read the secondary's own Secret: optional references to what the primary lacks are dropped", func(ctx SpecContext) {
		// The secondary's admin keeps a Secret db-root in the namespace it opted in.
		Expect(secondary.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-root"},
			StringData: map[string]string{"password": "secondary's own"}})).To(Succeed())
		yes := true
		pod := electedPod("reader", nil, "10m")
		pod.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db-root", Optional: &yes}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "root", MountPath: "/root-secret"}}
		pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "ROOT", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "db-root"}, Key: "password", Optional: &yes}}}}
		pod.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "db-root"}, Optional: &yes}}}
		Expect(primary.Client.Create(ctx, pod)).To(Succeed())
		var d *corev1.Pod
		Eventually(func() (err error) {
			d, err = delegate(ctx, "reader")
			return err
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(d.Spec.Volumes).To(ContainElement(And(HaveField("Name", "root"), HaveField("VolumeSource.Secret", BeNil()),
			HaveField("VolumeSource.EmptyDir", Not(BeNil())))), "an empty directory, as Kubernetes mounts a missing optional Secret")
		Expect(d.Spec.Containers[0].Env).To(BeEmpty())
		Expect(d.Spec.Containers[0].EnvFrom).To(BeEmpty())
		Expect(primary.Client.Delete(ctx, pod)).To(Succeed())
		Eventually(notFound(ctx, primary.Client, &corev1.Pod{}, "reader")).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(secondary.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-root"}})).To(Succeed())
	}, SpecTimeout(time.Minute))

	It("keeps a delegate naming a ServiceAccount of the secondary's own Pending with the reason until the namespace opts in", func(ctx SpecContext) {
		for _, c := range []*clusterenv.Cluster{primary, secondary} {
			Expect(c.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ci-deployer"}})).To(Succeed())
		}
		pod := electedPod("deployer", nil, "10m")
		pod.Spec.ServiceAccountName = "ci-deployer"
		Expect(primary.Client.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(primary.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
			g.Expect(p.Status.Reason).To(Equal(flotillav1.ReasonServiceAccountNotManaged))
			g.Expect(p.Status.Message).To(ContainSubstring(flotillav1.LabelAllowExistingServiceAccounts))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Consistently(func() error { _, err := delegate(ctx, "deployer"); return err }).WithContext(ctx).
			WithTimeout(2*time.Second).Should(MatchError(ContainSubstring("not found")), "no delegate runs as the secondary's ServiceAccount")

		var nsObj corev1.Namespace
		Expect(secondary.Client.Get(ctx, client.ObjectKey{Name: ns}, &nsObj)).To(Succeed())
		nsObj.Labels[flotillav1.LabelAllowExistingServiceAccounts] = "true"
		Expect(secondary.Client.Update(ctx, &nsObj)).To(Succeed())
		Eventually(func() error { _, err := delegate(ctx, "deployer"); return err }).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		delete(nsObj.Labels, flotillav1.LabelAllowExistingServiceAccounts)
		Expect(secondary.Client.Get(ctx, client.ObjectKey{Name: ns}, &nsObj)).To(Succeed())
		delete(nsObj.Labels, flotillav1.LabelAllowExistingServiceAccounts)
		Expect(secondary.Client.Update(ctx, &nsObj)).To(Succeed())
		Expect(primary.Client.Delete(ctx, pod)).To(Succeed())
		Eventually(notFound(ctx, primary.Client, &corev1.Pod{}, "deployer")).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
	}, SpecTimeout(time.Minute))

	It("refuses an elected pod whose delegate the namespace's Pod Security level forbids, and gives the secondary's namespace that level", func(ctx SpecContext) {
		const restricted = "restricted-ns"
		Expect(primary.Namespace(ctx, restricted, map[string]string{flotillav1.LabelEnabled: "true",
			"pod-security.kubernetes.io/enforce": "baseline"})).To(Succeed())
		host := electedPod("host", nil, "10m")
		host.Namespace = restricted
		host.Spec.HostNetwork = true
		Expect(primary.Client.Create(ctx, host)).To(MatchError(And(ContainSubstring("flotilla cannot elect this pod"),
			ContainSubstring("host namespaces"), ContainSubstring("baseline"))))
		ports := electedPod("ports", nil, "10m")
		ports.Namespace = restricted
		ports.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
		Expect(primary.Client.Create(ctx, ports)).To(MatchError(ContainSubstring("hostPort")))

		ok := electedPod("fine", nil, "10m")
		ok.Namespace = restricted
		Expect(primary.Client.Create(ctx, ok)).To(Succeed())
		Eventually(func(g Gomega) {
			var nsObj corev1.Namespace
			g.Expect(secondary.Client.Get(ctx, client.ObjectKey{Name: restricted}, &nsObj)).To(Succeed())
			g.Expect(nsObj.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "baseline"))
			g.Expect(nsObj.Labels).To(HaveKey(flotillav1.LabelManagedBy))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(primary.Client.Delete(ctx, ok)).To(Succeed())
	}, SpecTimeout(time.Minute))

	It("never loosens a secondary's Pod Security level, and carries a tightened primary level at once, without a new pod", func(ctx SpecContext) {
		const tightened, guarded = "psa-tightened", "psa-guarded"
		level := func(c *clusterenv.Cluster, name string) func(Gomega) string {
			return func(g Gomega) string {
				var n corev1.Namespace
				g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: name}, &n)).To(Succeed())
				return n.Labels["pod-security.kubernetes.io/enforce"]
			}
		}
		// An admin of the secondary made guarded restricted; the primary asks baseline.
		Expect(primary.Namespace(ctx, guarded, map[string]string{flotillav1.LabelEnabled: "true",
			"pod-security.kubernetes.io/enforce": "baseline"})).To(Succeed())
		Expect(secondary.Namespace(ctx, guarded, map[string]string{flotillav1.LabelManagedBy: secondaryManagedBy(ctx),
			"pod-security.kubernetes.io/enforce": "restricted"})).To(Succeed())
		Expect(primary.Namespace(ctx, tightened, map[string]string{flotillav1.LabelEnabled: "true",
			"pod-security.kubernetes.io/enforce": "privileged"})).To(Succeed())
		for _, n := range []string{guarded, tightened} {
			p := electedPod("psa", nil, "10m")
			p.Namespace = n
			if n == guarded { // passes restricted
				no, yes := false, true
				p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: &yes, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
				p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: &no,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
			}
			Expect(primary.Client.Create(ctx, p)).To(Succeed())
			if n == tightened { // Flotilla creates it; no controller manager here makes its default ServiceAccount
				Eventually(func() error {
					return secondary.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "default"}})
				}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
			}
			Eventually(func() error {
				var d corev1.Pod
				return secondary.Client.Get(ctx, client.ObjectKey{Namespace: n, Name: "psa"}, &d)
			}).WithContext(ctx).WithTimeout(20*time.Second).Should(Succeed(), "delegate in %s", n)
		}
		Consistently(level(secondary, guarded)).WithContext(ctx).WithTimeout(2*time.Second).Should(Equal("restricted"), "the admin's stricter level stays")
		Expect(level(secondary, tightened)(Default)).To(Equal("privileged"))

		// The primary tightens tightened; no pod is created.
		var n corev1.Namespace
		Expect(primary.Client.Get(ctx, client.ObjectKey{Name: tightened}, &n)).To(Succeed())
		base := n.DeepCopy()
		n.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
		Expect(primary.Client.Patch(ctx, &n, client.MergeFrom(base))).To(Succeed())
		Eventually(level(secondary, tightened)).WithContext(ctx).WithTimeout(20 * time.Second).Should(Equal("baseline"))
		for _, ns := range []string{guarded, tightened} {
			Expect(primary.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "psa"}})).To(Succeed())
		}
	}, SpecTimeout(time.Minute))

	It("backs off while a proxy waits for a missing Secret (a bounded number of reads), and creates the delegate as soon as it appears", func(ctx SpecContext) {
		pod := electedPod("patient", nil, "10m")
		pod.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "late-secret"}}}}
		Expect(primary.Client.Create(ctx, pod)).To(Succeed())
		reads := "GET /api/v1/namespaces/" + ns + "/secrets/late-secret"
		const waited = 20 * time.Second
		time.Sleep(waited)
		n := primaryCalls.get(reads)
		AddReportEntry("reads of the missing Secret in 20 s", n)
		GinkgoWriter.Printf("reads of the missing Secret in %s: %d\n", waited, n)
		// Polling every 250 ms would be 80; a quarter of the proxy's age, from 250 ms, is about 18.
		Expect(n).To(BeNumerically("<=", 25), "reads of the missing Secret in %s", waited)
		Expect(n).To(BeNumerically(">=", 3), "it is still being retried")

		start := time.Now()
		Expect(primary.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late-secret"},
			StringData: map[string]string{"K": "v"}})).To(Succeed())
		Eventually(func() error { _, err := delegate(ctx, "patient"); return err }).WithContext(ctx).WithTimeout(3*time.Second).Should(Succeed(),
			"the Secret's appearance brings the proxy back at once, not after its backoff")
		AddReportEntry("Secret created to delegate created", time.Since(start).Round(10*time.Millisecond).String())
		Expect(primary.Client.Delete(ctx, pod)).To(Succeed())
		Eventually(notFound(ctx, primary.Client, &corev1.Pod{}, "patient")).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
	}, SpecTimeout(time.Minute))

	It("sweeps a delegate whose proxy vanished (its finalizer removed by hand)", func(ctx SpecContext) {
		pod := electedPod("orphan", nil, "10m")
		Expect(primary.Client.Create(ctx, pod)).To(Succeed())
		Eventually(func() error { _, err := delegate(ctx, "orphan"); return err }).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		base := pod.DeepCopy()
		pod.Finalizers = nil
		Expect(primary.Client.Patch(ctx, pod, client.MergeFrom(base))).To(Succeed())
		Expect(primary.Client.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(notFound(ctx, secondary.Client, &corev1.Pod{}, "orphan")).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	}, SpecTimeout(time.Minute))
})

var _ = Describe("the dependency reconciler", func() {
	It("keeps a delegate's ConfigMap and Secret in sync, copies the Services and NetworkPolicies selecting it, removes them when unused", func(ctx SpecContext) {
		sel := map[string]string{"app": "dep"}
		Expect(primary.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dep-config"},
			Data: map[string]string{"LEVEL": "1"}})).To(Succeed())
		Expect(primary.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dep-secret"},
			StringData: map[string]string{"TOKEN": "one"}})).To(Succeed())
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dep"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: sel, Ports: []corev1.ServicePort{{Port: 80}}}}
		Expect(primary.Client.Create(ctx, svc)).To(Succeed())
		Expect(primary.Client.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dep"},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: sel}}})).To(Succeed())
		pod := electedPod("dep", nil, "10m")
		pod.Labels = sel
		pod.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "dep-config"}}},
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "dep-secret"}}}}
		Expect(primary.Client.Create(ctx, pod)).To(Succeed())

		Eventually(func(g Gomega) {
			_, err := delegate(ctx, "dep")
			g.Expect(err).NotTo(HaveOccurred())
			var copied corev1.Service
			g.Expect(secondary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dep"}, &copied)).To(Succeed())
			g.Expect(copied.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
			g.Expect(copied.Spec.Ports[0].NodePort).To(BeZero())
			g.Expect(copied.Spec.ClusterIP).NotTo(BeEmpty())
			g.Expect(copied.Spec.Selector).To(Equal(sel))
			g.Expect(secondary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dep"}, &networkingv1.NetworkPolicy{})).To(Succeed())
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(svc.Spec.Ports[0].NodePort).NotTo(BeZero(), "the primary's Service is a NodePort one")

		start := time.Now()
		cm := &corev1.ConfigMap{}
		Expect(primary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dep-config"}, cm)).To(Succeed())
		cm.Data["LEVEL"] = "2"
		Expect(primary.Client.Update(ctx, cm)).To(Succeed())
		secret := &corev1.Secret{}
		Expect(primary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dep-secret"}, secret)).To(Succeed())
		secret.Data["TOKEN"] = []byte("two")
		Expect(primary.Client.Update(ctx, secret)).To(Succeed())
		Eventually(func(g Gomega) {
			var c corev1.ConfigMap
			g.Expect(secondary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dep-config"}, &c)).To(Succeed())
			g.Expect(c.Data).To(HaveKeyWithValue("LEVEL", "2"))
			var s corev1.Secret
			g.Expect(secondary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dep-secret"}, &s)).To(Succeed())
			g.Expect(string(s.Data["TOKEN"])).To(Equal("two"))
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		AddReportEntry("ConfigMap and Secret change reached the secondary", time.Since(start).Round(100*time.Millisecond).String())

		Expect(primary.Client.Delete(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			notFound(ctx, secondary.Client, &corev1.ConfigMap{}, "dep-config")(g)
			notFound(ctx, secondary.Client, &corev1.Secret{}, "dep-secret")(g)
			notFound(ctx, secondary.Client, &corev1.Service{}, "dep")(g)
			notFound(ctx, secondary.Client, &networkingv1.NetworkPolicy{}, "dep")(g)
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(primary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dep-config"}, &corev1.ConfigMap{})).To(Succeed(), "the primary's own objects stay")
	}, SpecTimeout(2*time.Minute))
})

// secondaryManagedBy is the managed-by label value of this primary: the label of the suite's
// namespace in the secondary.
func secondaryManagedBy(ctx SpecContext) string {
	var n corev1.Namespace
	Expect(secondary.Client.Get(ctx, client.ObjectKey{Name: ns}, &n)).To(Succeed())
	return n.Labels[flotillav1.LabelManagedBy]
}
