package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// badImage is an image no registry serves. kwok runs no container, so the stage below plays
// the kubelet: the pods of this image wait in ErrImagePull, as a real node leaves them.
const badImage = "flotilla.invalid/no-such-image:1"

// imagePullFailureStage makes kwok leave the pods of badImage waiting, never Ready: it takes
// them before kwok's pod-create stage (a weight against its 1) and gives them an address and
// Initialized False, so neither pod-create nor pod-ready matches them again.
var imagePullFailureStage = fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: e2e-image-pull-failure
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.podIP'
      operator: 'DoesNotExist'
    - key: '.spec.containers.[].image'
      operator: 'In'
      values: [%q]
  weight: 1000000000
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - {type: PodScheduled, status: "True", lastTransitionTime: {{ $now | Quote }}}
      - {type: Initialized, status: "False", reason: ImagePullFailure, lastTransitionTime: {{ $now | Quote }}}
      - {type: ContainersReady, status: "False", reason: ContainersNotReady, lastTransitionTime: {{ $now | Quote }}}
      - {type: Ready, status: "False", reason: ContainersNotReady, lastTransitionTime: {{ $now | Quote }}}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          waiting:
            reason: ErrImagePull
            message: 'failed to pull image {{ .image }}: not found'
      {{ end }}
      hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
      podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
      phase: Pending
      startTime: {{ $now | Quote }}
`, badImage)

var stageGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "stages"}

// deploymentImage is the image of a Deployment's first container in a cluster.
func deploymentImage(g Gomega, ctx SpecContext, c *testbed.Cluster, ns, name string) string {
	d, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "Deployment in %s", c.Name)
	return d.Spec.Template.Spec.Containers[0].Image
}

var _ = Describe("Replicator health and rollout", Ordered, func() {
	BeforeAll(func(ctx SpecContext) {
		joinBothSecondaries(ctx)
		var stage unstructured.Unstructured
		Expect(yaml.Unmarshal([]byte(imagePullFailureStage), &stage.Object)).To(Succeed())
		for _, c := range bed.Secondaries {
			dyn, err := dynamic.NewForConfig(c.RESTConfig)
			Expect(err).NotTo(HaveOccurred())
			_, err = dyn.Resource(stageGVR).Create(ctx, &stage, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred(), "in %s", c.Name)
			DeferCleanup(func(ctx SpecContext) {
				Expect(dyn.Resource(stageGVR).Delete(ctx, stage.GetName(), metav1.DeleteOptions{})).To(Succeed())
			})
		}
	}, NodeTimeout(2*time.Minute))

	It("rolls a change out wave by wave: a bad image stops at the first wave with the reason, the next keeps the old spec; fixed, it rolls on and is Healthy everywhere", func(ctx SpecContext) {
		const ns, name = "rollout-ns", "rollout"
		s1, s2 := bed.Secondaries[0], bed.Secondaries[1]
		primary := clientOf(bed.Primary)
		two := int32(2)
		rep := &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: flotillav1.ReplicatorSpec{
			TargetCluster: []string{s1.Name, s2.Name}, ReplicationNamespace: ns,
			Rollout:        &flotillav1.Rollout{Waves: []flotillav1.RolloutWave{{Clusters: []string{s1.Name}}, {Clusters: []string{s2.Name}}}},
			DeploymentName: "web", DeploymentSpec: &flotillav1.ReplicatedDeploymentSpec{Replicas: &two, Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}},
			ServiceName: "web", ServiceSpec: &corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}}
		Expect(primary.Create(ctx, rep)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(primary.Delete(ctx, rep))).To(Succeed())
			Eventually(func() error { _, err := replicatorStatus(ctx, name); return err }).WithContext(ctx).
				WithTimeout(60 * time.Second).Should(MatchError(ContainSubstring("not found")))
		})
		condition := func(g Gomega, t string) metav1.Condition {
			st, err := replicatorStatus(ctx, name)
			g.Expect(err).NotTo(HaveOccurred())
			c := meta.FindStatusCondition(st.Status.Conditions, t)
			g.Expect(c).NotTo(BeNil(), "no %s condition: %+v", t, st.Status.Conditions)
			return *c
		}
		clusterOf := func(g Gomega, cluster string) flotillav1.ClusterSync {
			st, err := replicatorStatus(ctx, name)
			g.Expect(err).NotTo(HaveOccurred())
			for _, c := range st.Status.Clusters {
				if c.Name == cluster {
					return c
				}
			}
			g.Expect(st.Status.Clusters).To(ContainElement(HaveField("Name", cluster)))
			return flotillav1.ClusterSync{}
		}
		healthyEverywhere := func(image string) func(g Gomega) {
			return func(g Gomega) {
				g.Expect(condition(g, flotillav1.ConditionHealthy)).To(HaveField("Status", metav1.ConditionTrue))
				g.Expect(condition(g, flotillav1.ConditionProgressing)).To(And(HaveField("Status", metav1.ConditionTrue),
					HaveField("Reason", flotillav1.ReasonRolledOut)))
				for _, c := range bed.Clusters() {
					g.Expect(deploymentImage(g, ctx, c, ns, "web")).To(Equal(image), "in %s", c.Name)
					cs := clusterOf(g, map[bool]string{true: "primary", false: c.Name}[c == bed.Primary])
					g.Expect(cs.Healthy).To(BeTrue(), "%+v", cs)
					g.Expect(cs.Health).To(ContainElements(And(HaveField("Kind", "Deployment"), HaveField("Reason", "Available")),
						And(HaveField("Kind", "Service"), HaveField("Healthy", true))), "in %s", c.Name)
				}
			}
		}
		start := time.Now()
		Eventually(healthyEverywhere("nginx:1.27")).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("three clusters healthy, wave by wave, after", time.Since(start).Round(100*time.Millisecond).String())
		Expect(clusterOf(Default, s1.Name).Wave).To(BeEquivalentTo(1))
		Expect(clusterOf(Default, s2.Name).Wave).To(BeEquivalentTo(2))
		Expect(clusterOf(Default, "primary").Wave).To(BeEquivalentTo(3), "the primary, named in no wave, comes last")

		tools, err := testbed.ToolsDir("")
		Expect(err).NotTo(HaveOccurred())
		out, err := exec.CommandContext(ctx, filepath.Join(tools, "kubectl"), "--kubeconfig", bed.KubeconfigPath, "--context", testbed.PrimaryName,
			"get", "rep", name).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(MatchRegexp(`HEALTHY[\s\S]*rollout\s+synced\s+3/3\s+True`))

		By("a bad image: it reaches the first wave only")
		setImage := func(image string) {
			var live flotillav1.Replicator
			Expect(primary.Get(ctx, client.ObjectKey{Name: name}, &live)).To(Succeed())
			base := live.DeepCopy()
			live.Spec.DeploymentSpec.Template.Spec.Containers[0].Image = image
			Expect(primary.Patch(ctx, &live, client.MergeFrom(base))).To(Succeed())
		}
		setImage(badImage)
		Eventually(func(g Gomega) {
			g.Expect(deploymentImage(g, ctx, s1, ns, "web")).To(Equal(badImage))
			p := condition(g, flotillav1.ConditionProgressing)
			g.Expect(p.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(p.Reason).To(Equal(flotillav1.ReasonRolloutBlocked))
			g.Expect(p.Message).To(And(ContainSubstring("the 1st wave ("+s1.Name+")"), ContainSubstring("ImagePullFailed"), ContainSubstring("ErrImagePull")))
			h := condition(g, flotillav1.ConditionHealthy)
			g.Expect(h.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(h.Message).To(ContainSubstring(s1.Name + ": Deployment web: ImagePullFailed"))
			g.Expect(clusterOf(g, s2.Name)).To(And(HaveField("Held", true), HaveField("Message", ContainSubstring("waits for the 1st wave"))))
			var events eventsv1.EventList
			g.Expect(primary.List(ctx, &events)).To(Succeed())
			g.Expect(events.Items).To(ContainElement(And(HaveField("Reason", flotillav1.ReasonRolloutBlocked), HaveField("Regarding.Name", name),
				HaveField("Type", corev1.EventTypeWarning))))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(deploymentImage(g, ctx, s2, ns, "web")).To(Equal("nginx:1.27"), "the second wave keeps the old spec")
			g.Expect(deploymentImage(g, ctx, bed.Primary, ns, "web")).To(Equal("nginx:1.27"), "so does the primary, in the last wave")
			var d appsv1.Deployment
			g.Expect(clientOf(s2).Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &d)).To(Succeed())
			g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(2), "untouched, still serving")
			g.Expect(condition(g, flotillav1.ConditionProgressing).Reason).To(Equal(flotillav1.ReasonRolloutBlocked))
		}).WithContext(ctx).WithTimeout(15 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("the image fixed: the rollout goes on to every wave")
		fixed := time.Now()
		setImage("nginx:1.28")
		Eventually(healthyEverywhere("nginx:1.28")).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("the fixed image healthy in three waves after", time.Since(fixed).Round(100*time.Millisecond).String())
		for _, c := range []string{s1.Name, s2.Name, "primary"} {
			Expect(clusterOf(Default, c)).To(And(HaveField("Held", false), HaveField("Synced", true)), c)
		}
	}, SpecTimeout(10*time.Minute))

	It("flotillactl replicate makes a Replicator from what a namespace holds, which gets healthy in the target; deleted, it takes what it adopted", func(ctx SpecContext) {
		const ns = "replicate-ns"
		s1 := bed.Secondaries[0]
		primary := clientOf(bed.Primary)
		one := int32(1)
		sel := map[string]string{"app": "shop"}
		Expect(primary.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(primary.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		})
		Expect(primary.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"}, Spec: appsv1.DeploymentSpec{
			Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "shop", Image: "nginx:1.27"}}}}}})).To(Succeed())
		Expect(primary.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
			Spec: corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{Port: 80}}}})).To(Succeed())
		Expect(primary.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "password"}, StringData: map[string]string{"p": "s3cret"}})).To(Succeed())

		out, err := flotillactl(ctx, "replicate", ns, "--to", s1.Name, "--dry-run=client", "-o", "yaml")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(And(ContainSubstring("kind: Replicator"), ContainSubstring("replicationNamespace: "+ns), ContainSubstring("kind: Deployment"),
			ContainSubstring("kind: Service"), ContainSubstring("skipped: Secret password"), Not(ContainSubstring("s3cret")), Not(ContainSubstring("clusterIP"))))
		_, err = replicatorStatus(ctx, ns)
		Expect(err).To(MatchError(ContainSubstring("not found")), "a dry run writes nothing")

		out, err = flotillactl(ctx, "replicate", ns, "--to", s1.Name, "--adopt")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("replicator.flotilla.dev/" + ns + " created: 2 object(s) of " + ns + " added, targets " + s1.Name))
		Eventually(func(g Gomega) {
			st, err := replicatorStatus(ctx, ns)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Status.Synced).To(Equal("synced"), "%+v", st.Status.Clusters)
			g.Expect(meta.IsStatusConditionTrue(st.Status.Conditions, flotillav1.ConditionHealthy)).To(BeTrue(), "%+v", st.Status.Conditions)
			g.Expect(deploymentImage(g, ctx, s1, ns, "shop")).To(Equal("nginx:1.27"))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

		Expect(primary.Delete(ctx, &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Eventually(func(g Gomega) {
			_, err := replicatorStatus(ctx, ns)
			g.Expect(err).To(MatchError(ContainSubstring("not found")))
			err = primary.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop"}, &appsv1.Deployment{})
			g.Expect(err).To(MatchError(ContainSubstring("not found")), "adopted, the primary's Deployment goes with the Replicator (as documented)")
			g.Expect(primary.Get(ctx, client.ObjectKey{Namespace: ns, Name: "password"}, &corev1.Secret{})).To(Succeed(), "what it did not take stays")
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	}, SpecTimeout(5*time.Minute))
})
