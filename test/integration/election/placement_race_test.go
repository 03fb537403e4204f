package election_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/test/integration/clusterenv"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

// These specs need a second secondary, joined while the manager runs (as `flotillactl cluster
// join` does: a context added to the registration Secret), and, to see where pods end, the
// primary's own kube-scheduler (and, for a Deployment, its deployment and replicaset
// controllers): the upstream binaries of the test bed (test/tools/install.sh bed), run against the
// suite's primary for the spec's length only. Where they are not built (make integration builds
// only kube-apiserver and etcd), the race spec checks the placement the scheduler would get and
// the spread spec is skipped.

var _ = Describe("placement racing a secondary's node labels", func() {
	It("binds every elected pod created at once after one secondary's nodes are labelled to that secondary, and never anywhere else", func(ctx SpecContext) {
		const label, count = "zone", 8
		west := joinSecondary(ctx, "west", "west-1")
		westNode := flotillav1.VirtualNodeName(west.Name)
		scheduling := startBinary("kube-scheduler", false, "--leader-elect=false", "--secure-port=0")
		// The webhook knows west and its node as they are (unlabelled): a pod selecting west's
		// region is bound there at admission.
		Eventually(func(g Gomega) {
			p := electedPod("probe-west", nil, "10m")
			p.Spec.NodeSelector = map[string]string{corev1.LabelTopologyRegion: "region-" + west.Name}
			g.Expect(primary.Client.Create(ctx, p, client.DryRunAll)).To(Succeed())
			g.Expect(p.Spec.NodeName).To(Equal(westNode))
		}).WithContext(ctx).WithTimeout(45 * time.Second).Should(Succeed())

		sel := map[string]string{"race": "labels"}
		seen := recordNodeNames(ctx, sel)
		// Admiralty's race: the target's nodes labelled, the pods selecting the label created at
		// once, while the webhook's view of the target may not have the label yet.
		var node corev1.Node
		Expect(west.Client.Get(ctx, client.ObjectKey{Name: "west-1"}, &node)).To(Succeed())
		base := node.DeepCopy()
		node.Labels[label] = "target"
		Expect(west.Client.Patch(ctx, &node, client.MergeFrom(base))).To(Succeed())
		names := make([]string, count)
		boundAtAdmission, gatedAtAdmission := 0, 0
		for i := range names {
			names[i] = fmt.Sprintf("race-%d", i)
			p := electedPod(names[i], nil, "10m")
			p.Labels = sel
			p.Spec.NodeSelector = map[string]string{label: "target"}
			Expect(primary.Client.Create(ctx, p)).To(Succeed())
			seen.add(p.Name, p.Spec.NodeName)
			switch {
			case p.Spec.NodeName != "":
				boundAtAdmission++
			case len(p.Spec.SchedulingGates) > 0:
				gatedAtAdmission++
			}
		}
		DeferCleanup(func(ctx SpecContext) { deletePods(ctx, sel) })
		AddReportEntry("bound at admission / gated at admission", fmt.Sprintf("%d / %d of %d", boundAtAdmission, gatedAtAdmission, count))

		Eventually(func(g Gomega) {
			for _, name := range names {
				var p corev1.Pod
				g.Expect(primary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)).To(Succeed())
				g.Expect(p.Spec.SchedulingGates).To(BeEmpty(), "%s is placed", name)
				if p.Spec.NodeName == "" && !scheduling {
					// No scheduler here (kube-scheduler is not built): the proxy is left to it
					// with the target alone in its choice.
					g.Expect(p.Spec.Affinity).NotTo(BeNil(), name)
					g.Expect(p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values).
						To(ConsistOf(west.Name), name)
					continue
				}
				g.Expect(p.Spec.NodeName).To(Equal(westNode), name)
				var d corev1.Pod
				g.Expect(west.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed(), "the delegate of %s in %s", name, west.Name)
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())

		var elsewhere corev1.PodList
		Expect(secondary.Client.List(ctx, &elsewhere, client.InNamespace(ns), client.MatchingLabels(sel))).To(Succeed())
		Expect(elsewhere.Items).To(BeEmpty(), "no delegate in %s, whose node does not match", secondary.Name)
		for _, name := range names {
			Expect(seen.get(name)).NotTo(ContainElement(Not(Equal(westNode))), "every node %s was ever bound to", name)
		}
	}, SpecTimeout(4*time.Minute))
})

var _ = Describe("a spread over clusters as a cluster joins", func() {
	It("splits a Deployment of 10 created as a second secondary joins, while the webhook sees none of its capacity, 5/5 over both clusters", func(ctx SpecContext) {
		requireBinaries("kube-scheduler", "kube-controller-manager")
		// The cluster joins with no node the webhook can see yet: at the Deployment's creation the
		// webhook knows the cluster but none of its capacity, as it does in the moments after a
		// join before the new cluster's nodes are synced (the incident: 10/0 on the first
		// cluster). Its node is made after every proxy is admitted.
		late := joinSecondary(ctx, "late")
		startBinary("kube-scheduler", true, "--leader-elect=false", "--secure-port=0")
		startBinary("kube-controller-manager", true, "--leader-elect=false", "--secure-port=0",
			"--controllers=deployment-controller,replicaset-controller")

		sel := map[string]string{"app": "spread"}
		tmpl := electedPod("", nil, "10m")
		tmpl.Labels = sel
		tmpl.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: flotillav1.LabelCluster,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: sel}}}
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "spread"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](10), Selector: &metav1.LabelSelector{MatchLabels: sel},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}}}
		Expect(primary.Client.Create(ctx, dep)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { deleteDeployment(ctx, dep) })

		// Every proxy keeps both clusters in its choice: the one without known capacity is only
		// away for now, not out of the spread for good.
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(primary.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(sel))).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(10))
			for _, p := range pods.Items {
				g.Expect(p.Spec.SchedulingGates).To(BeEmpty(), p.Name)
				g.Expect(p.Spec.TopologySpreadConstraints).To(HaveLen(1), p.Name)
				g.Expect(p.Spec.Affinity).NotTo(BeNil(), p.Name)
				g.Expect(p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values).
					To(ConsistOf(secondary.Name, late.Name), p.Name)
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		// Until the late cluster has room, the spread holds the first cluster to one pod ahead.
		var pods corev1.PodList
		Expect(primary.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(sel))).To(Succeed())
		early := 0
		for _, p := range pods.Items {
			Expect(p.Spec.NodeName).To(BeElementOf("", flotillav1.VirtualNodeName(secondary.Name)), p.Name)
			if p.Spec.NodeName != "" {
				early++
			}
		}
		Expect(early).To(BeNumerically("<=", 1), "pods bound to %s before %s had a node", secondary.Name, late.Name)

		Expect(late.ReadyNode(ctx, "late-1", "8", "16Gi")).To(Succeed())
		start := time.Now()
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(primary.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(sel))).To(Succeed())
			perNode := map[string]int{}
			for _, p := range pods.Items {
				perNode[p.Spec.NodeName]++
			}
			g.Expect(perNode).To(Equal(map[string]int{flotillav1.VirtualNodeName(secondary.Name): 5, flotillav1.VirtualNodeName(late.Name): 5}))
			for _, c := range []*clusterenv.Cluster{secondary, late} {
				var delegates corev1.PodList
				g.Expect(c.Client.List(ctx, &delegates, client.InNamespace(ns), client.MatchingLabels(sel))).To(Succeed())
				g.Expect(delegates.Items).To(HaveLen(5), "delegates in %s", c.Name)
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())
		AddReportEntry("late cluster's node made to 5/5 with delegates", time.Since(start).Round(100*time.Millisecond).String())
	}, SpecTimeout(5*time.Minute))
})

// joinSecondary starts a secondary with Ready nodes (8 CPUs each) and this suite's namespace, and
// registers it as `flotillactl cluster join` does, while the manager runs, and waits until its
// virtual node is Ready. Its clean-up removes it
// as `flotillactl cluster remove` does (its context gone, the cluster named removed) once the
// manager has let go of its virtual node, and stops it.
func joinSecondary(ctx SpecContext, name string, nodes ...string) *clusterenv.Cluster {
	c, err := clusterenv.Start(name)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(c.Stop()).To(Succeed()) })
	Expect(c.Namespace(ctx, ns, map[string]string{flotillav1.LabelManagedBy: secondaryManagedBy(ctx)})).To(Succeed())
	for _, n := range nodes {
		Expect(c.ReadyNode(ctx, n, "8", "16Gi")).To(Succeed())
	}
	raw, err := clusterenv.Kubeconfig(c)
	Expect(err).NotTo(HaveOccurred())
	own, err := clientcmd.Load(raw)
	Expect(err).NotTo(HaveOccurred())
	Expect(clusters.UpdateRegistration(ctx, primary.Client, func(r *clusters.Registration) error {
		r.Config.Clusters[name], r.Config.AuthInfos[name], r.Config.Contexts[name] = own.Clusters[name], own.AuthInfos[name], own.Contexts[name]
		delete(r.Removed, name)
		return nil
	})).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(clusters.UpdateRegistration(ctx, primary.Client, func(r *clusters.Registration) error {
			delete(r.Config.Clusters, name)
			delete(r.Config.AuthInfos, name)
			delete(r.Config.Contexts, name)
			r.Removed[name] = true
			return nil
		})).To(Succeed())
		Eventually(func(g Gomega) {
			err := primary.Client.Get(ctx, client.ObjectKey{Name: flotillav1.VirtualNodeName(name)}, &corev1.Node{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "virtual node of %s: %v", name, err)
			err = primary.Client.Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: name}, &flotillav1.ClusterDetector{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ClusterDetector %s: %v", name, err)
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		// The registration as it was before the join.
		Expect(clusters.UpdateRegistration(ctx, primary.Client, func(r *clusters.Registration) error {
			delete(r.Removed, name)
			return nil
		})).To(Succeed())
	}, NodeTimeout(90*time.Second))
	// Joined as the webhook sees it: the cluster's virtual node is there (the registry knows the
	// cluster) and Ready, without the not-ready taint (no node lifecycle controller here lifts it).
	Eventually(func() error { return primary.LiftNotReadyTaint(ctx, flotillav1.VirtualNodeName(name)) }).
		WithContext(ctx).WithTimeout(45 * time.Second).Should(Succeed())
	return c
}

// requireBinaries skips the spec when one of the test bed's binaries is not built (make
// integration builds only kube-apiserver and etcd; test/tools/install.sh bed builds the rest).
func requireBinaries(names ...string) {
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(os.Getenv("FLOTILLA_TOOLS_DIR"), n)); err != nil {
			Skip(fmt.Sprintf("%s is not built (test/tools/install.sh bed): %v", n, err))
		}
	}
}

// startBinary runs one of the test bed's control-plane binaries against the primary until the
// spec ends, with its log kept for a failure. Without the binary it says false, or skips the spec
// when required.
func startBinary(name string, required bool, args ...string) bool {
	bin := filepath.Join(os.Getenv("FLOTILLA_TOOLS_DIR"), name)
	if _, err := os.Stat(bin); err != nil {
		if required {
			requireBinaries(name)
		}
		GinkgoWriter.Printf("%s is not built (test/tools/install.sh bed): the spec runs without it\n", name)
		return false
	}
	dir := GinkgoT().TempDir()
	raw, err := clusterenv.Kubeconfig(primary)
	Expect(err).NotTo(HaveOccurred())
	cfg, err := clientcmd.Load(raw)
	Expect(err).NotTo(HaveOccurred())
	cfg.CurrentContext = primary.Name
	kubeconfig := filepath.Join(dir, "kubeconfig")
	Expect(clientcmd.WriteToFile(*cfg, kubeconfig)).To(Succeed())
	var log testbed.SyncBuffer
	cmd := exec.Command(bin, append([]string{"--kubeconfig=" + kubeconfig}, args...)...) //nolint:gosec // the test bed's own binary
	cmd.Stdout, cmd.Stderr = &log, &log
	Expect(cmd.Start()).To(Succeed())
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	DeferCleanup(func() {
		select {
		case <-exited:
			Fail(fmt.Sprintf("%s exited during the spec (%v):\n%s", name, waitErr, log.String()))
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if CurrentSpecReport().Failed() {
			GinkgoWriter.Printf("%s log:\n%s\n", name, log.String())
		}
	})
	Consistently(exited).WithTimeout(time.Second).ShouldNot(BeClosed(), "%s starts", name)
	return true
}

// nodeNames records every node each pod was ever bound to.
type nodeNames struct {
	mu sync.Mutex
	m  map[string][]string
}

func (n *nodeNames) add(pod, node string) {
	if node == "" {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.m[pod] = append(n.m[pod], node)
}

func (n *nodeNames) get(pod string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.m[pod]...)
}

// recordNodeNames watches the primary's pods with these labels until the spec ends, recording the
// node of every version of each.
func recordNodeNames(ctx SpecContext, sel map[string]string) *nodeNames {
	c, err := client.NewWithWatch(primary.Config, client.Options{Scheme: clusterenv.Scheme})
	Expect(err).NotTo(HaveOccurred())
	wctx, cancel := context.WithCancel(ctx)
	w, err := c.Watch(wctx, &corev1.PodList{}, client.InNamespace(ns), client.MatchingLabels(sel))
	Expect(err).NotTo(HaveOccurred())
	seen := &nodeNames{m: map[string][]string{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Error {
				seen.add(p.Name, p.Spec.NodeName)
			}
		}
	}()
	DeferCleanup(func() {
		w.Stop()
		cancel()
		<-done
	})
	return seen
}

// deletePods deletes the primary's pods with these labels and waits until they are gone.
func deletePods(ctx SpecContext, sel map[string]string) {
	Expect(primary.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.MatchingLabels(sel))).To(Succeed())
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(primary.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(sel))).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty())
	}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
}

// deleteDeployment scales a Deployment to nothing, waits until its pods are gone, and deletes it
// and its ReplicaSets (no garbage collector runs here).
func deleteDeployment(ctx SpecContext, dep *appsv1.Deployment) {
	var live appsv1.Deployment
	Expect(primary.Client.Get(ctx, client.ObjectKeyFromObject(dep), &live)).To(Succeed())
	base := live.DeepCopy()
	live.Spec.Replicas = ptr.To[int32](0)
	Expect(primary.Client.Patch(ctx, &live, client.MergeFrom(base))).To(Succeed())
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(primary.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(dep.Spec.Selector.MatchLabels))).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty())
	}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	Expect(primary.Client.Delete(ctx, &live)).To(Succeed())
	Expect(primary.Client.DeleteAllOf(ctx, &appsv1.ReplicaSet{}, client.InNamespace(ns), client.MatchingLabels(dep.Spec.Selector.MatchLabels))).To(Succeed())
}
