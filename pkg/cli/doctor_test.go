package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/webhook"
)

// virtualNode is a virtual node as the manager makes it: labels, provider taint, Ready.
func virtualNode(cluster string, ready corev1.ConditionStatus, extraTaints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: flotillav1.VirtualNodeName(cluster), Labels: map[string]string{
			flotillav1.LabelNodeType: flotillav1.NodeTypeVirtualKubelet, flotillav1.LabelCluster: cluster}},
		Spec: corev1.NodeSpec{Taints: append([]corev1.Taint{{Key: flotillav1.TaintVirtualNode,
			Value: flotillav1.TaintVirtualNodeValue, Effect: corev1.TaintEffectNoSchedule}}, extraTaints...)},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready,
			Reason: "SecondaryUnavailable", Message: "connection refused"}}},
	}
}

func daemonSet(namespace, name string, mutate func(*corev1.PodSpec)) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "busybox"}}
	mutate(&ds.Spec.Template.Spec)
	return ds
}

var (
	tolerateAll      = corev1.Toleration{Operator: corev1.TolerationOpExists}
	tolerateProvider = corev1.Toleration{Key: flotillav1.TaintVirtualNode, Operator: corev1.TolerationOpExists}
	excludeVirtual   = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: "type", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"virtual-kubelet"}}}}}}}}
	fenced = corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}
)

func TestCanTargetNodeFollowsTheDaemonSetController(t *testing.T) {
	ready := virtualNode("a", corev1.ConditionTrue)
	for name, tc := range map[string]struct {
		spec func(*corev1.PodSpec)
		node *corev1.Node
		want bool
	}{
		"tolerate-all":                   {func(s *corev1.PodSpec) { s.Tolerations = []corev1.Toleration{tolerateAll} }, ready, true},
		"tolerates the provider taint":   {func(s *corev1.PodSpec) { s.Tolerations = []corev1.Toleration{tolerateProvider} }, ready, true},
		"no toleration for the provider": {func(*corev1.PodSpec) {}, ready, false},
		"nodeSelector kubernetes.io/os": {func(s *corev1.PodSpec) {
			s.Tolerations, s.NodeSelector = []corev1.Toleration{tolerateAll}, map[string]string{corev1.LabelOSStable: "linux"}
		}, ready, false},
		"nodeSelector on a flotilla label": {func(s *corev1.PodSpec) {
			s.Tolerations, s.NodeSelector = []corev1.Toleration{tolerateAll}, map[string]string{flotillav1.LabelCluster: "a"}
		}, ready, true},
		"affinity type NotIn [virtual-kubelet]": {func(s *corev1.PodSpec) {
			s.Tolerations, s.Affinity = []corev1.Toleration{tolerateAll}, excludeVirtual
		}, ready, false},
		"exclusion in only one of two ORed terms": {func(s *corev1.PodSpec) {
			s.Tolerations, s.Affinity = []corev1.Toleration{tolerateAll}, excludeVirtual.DeepCopy()
			req := s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
			req.NodeSelectorTerms = append(req.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: flotillav1.LabelCluster, Operator: corev1.NodeSelectorOpExists}}})
		}, ready, true},
		"the webhook's own exclusion": {func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{tolerateAll}
			webhook.ExcludeVirtualNodes(s)
		}, ready, false},
		"nodeName of another node": {func(s *corev1.PodSpec) {
			s.Tolerations, s.NodeName = []corev1.Toleration{tolerateAll}, "worker-0"
		}, ready, false},
		"nodeName of the virtual node": {func(s *corev1.PodSpec) {
			s.Tolerations, s.NodeName = []corev1.Toleration{tolerateAll}, "flotilla-a"
		}, ready, true},
		// The controller's own tolerations cover not-ready and cordoned nodes.
		"NotReady node": {func(s *corev1.PodSpec) { s.Tolerations = []corev1.Toleration{tolerateProvider} },
			virtualNode("a", corev1.ConditionFalse, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}), true},
		"cordoned node": {func(s *corev1.PodSpec) { s.Tolerations = []corev1.Toleration{tolerateProvider} },
			virtualNode("a", corev1.ConditionTrue, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}), true},
		"fenced node, provider toleration only": {func(s *corev1.PodSpec) { s.Tolerations = []corev1.Toleration{tolerateProvider} },
			virtualNode("a", corev1.ConditionTrue, fenced), false},
		"PreferNoSchedule is not a barrier": {func(s *corev1.PodSpec) { s.Tolerations = []corev1.Toleration{tolerateProvider} },
			virtualNode("a", corev1.ConditionTrue, corev1.Taint{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}), true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := canTargetNode(daemonSet("ns", "ds", tc.spec), tc.node); got != tc.want {
				t.Errorf("canTargetNode = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestExclusionYAMLIsTheWebhooksTerm(t *testing.T) {
	got := exclusionYAML()
	for _, want := range []string{"requiredDuringSchedulingIgnoredDuringExecution:", "- key: type", "operator: NotIn", "- virtual-kubelet"} {
		if !strings.Contains(got, want) {
			t.Errorf("exclusion YAML lacks %q:\n%s", want, got)
		}
	}
}

func TestPendingProxyFinding(t *testing.T) {
	unbound := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"}}}}
	f := pendingProxyFinding(unbound)
	if f.Severity != severityWarning || f.Message != "proxy demo/web is Pending, not bound to a virtual node: Unschedulable: 0/3 nodes are available" {
		t.Errorf("unbound: %+v", f)
	}
	bound := unbound.DeepCopy()
	bound.Spec.NodeName, bound.Status.Conditions = "flotilla-a", nil
	bound.Status.Reason, bound.Status.Message = "DelegatePending", "image pulling"
	f = pendingProxyFinding(bound)
	if f.Severity != severityInfo || f.Message != "proxy demo/web is Pending on flotilla-a, waiting for its delegate: DelegatePending: image pulling" {
		t.Errorf("bound: %+v", f)
	}
}

func TestNodeReadiness(t *testing.T) {
	if why, ok := nodeReadiness(virtualNode("a", corev1.ConditionTrue)); !ok {
		t.Errorf("Ready node not ready: %s", why)
	}
	if why, ok := nodeReadiness(virtualNode("a", corev1.ConditionUnknown)); ok || !strings.Contains(why, "manager running") {
		t.Errorf("Unknown: %v %q", ok, why)
	}
	if why, ok := nodeReadiness(&corev1.Node{}); ok || why == "" {
		t.Errorf("no condition: %v %q", ok, why)
	}
}

// primaryObjects is a primary with two virtual nodes (one NotReady), a real node, DaemonSets
// that do and do not reach virtual nodes, and proxies in each state.
func primaryObjects() []client.Object {
	proxy := func(name, node string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, Labels: map[string]string{flotillav1.LabelProxy: "true"}},
			Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			Status: corev1.PodStatus{Phase: phase, Reason: "Waiting", Message: "no secondary fits"}}
	}
	return []client.Object{
		virtualNode("a", corev1.ConditionTrue), virtualNode("b", corev1.ConditionFalse),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-0", Labels: map[string]string{corev1.LabelOSStable: "linux"}}},
		daemonSet("kube-system", "tolerate-all", func(s *corev1.PodSpec) { s.Tolerations = []corev1.Toleration{tolerateAll} }),
		daemonSet("kube-system", "kube-proxy", func(s *corev1.PodSpec) {
			s.Tolerations, s.NodeSelector = []corev1.Toleration{tolerateAll}, map[string]string{corev1.LabelOSStable: "linux"}
		}),
		daemonSet("monitoring", "excluded", func(s *corev1.PodSpec) { s.Tolerations, s.Affinity = []corev1.Toleration{tolerateAll}, excludeVirtual }),
		daemonSet("monitoring", "only-a", func(s *corev1.PodSpec) {
			s.Tolerations, s.NodeSelector = []corev1.Toleration{tolerateProvider}, map[string]string{flotillav1.LabelCluster: "a"}
		}),
		proxy("unbound", "", corev1.PodPending), proxy("bound", "flotilla-a", corev1.PodPending), proxy("running", "flotilla-a", corev1.PodRunning),
	}
}

func doctorWith(t *testing.T, c client.Client, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := newDoctorCommand(func() (client.Client, error) { return c, nil })
	cmd.SilenceUsage, cmd.SilenceErrors = true, true // as under the root command
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(t.Context())
	return out.String(), err
}

func TestDoctorReportsEveryCheckAndFailsWithoutTheWebhook(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(primaryObjects()...).Build()
	out, err := doctorWith(t, c)
	if !errors.Is(err, errDoctorFound) {
		t.Fatalf("err = %v, want errDoctorFound; output:\n%s", err, out)
	}
	want := []string{
		"OK    2 virtual nodes (1 Ready): flotilla-a, flotilla-b\n",
		"WARN  virtual node flotilla-b is not Ready: Ready=False: SecondaryUnavailable: connection refused\n",
		"WARN  daemonset kube-system/tolerate-all can run on virtual nodes flotilla-a, flotilla-b\n",
		"WARN  daemonset monitoring/only-a can run on virtual nodes flotilla-a\n",
		"WARN  proxy demo/unbound is Pending, not bound to a virtual node: Waiting: no secondary fits\n",
		"INFO  proxy demo/bound is Pending on flotilla-a, waiting for its delegate: Waiting: no secondary fits\n",
		"ERROR MutatingWebhookConfiguration flotilla is missing",
		"\nSummary: 1 error, 4 warnings, 1 info, 1 OK\n",
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	for _, absent := range []string{"kube-proxy", "excluded", "worker-0", "demo/running"} {
		if strings.Contains(out, absent) {
			t.Errorf("output mentions %q:\n%s", absent, out)
		}
	}
	if n := strings.Count(out, "operator: NotIn"); n != 1 {
		t.Errorf("the fix is printed %d times, want once:\n%s", n, out)
	}
}

func TestDoctorPassesWithTheWebhookAndJSON(t *testing.T) {
	objs := append(primaryObjects(), &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.ConfigurationName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "pods.flotilla.dev"}, {Name: "daemonsets.flotilla.dev"}}})
	c := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(objs...).Build()
	out, err := doctorWith(t, c, "-o", "json")
	if err != nil {
		t.Fatalf("doctor failed: %v\n%s", err, out)
	}
	var report doctorReport
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if report.Summary[severityError] != 0 || report.Summary[severityWarning] != 4 || report.Summary[severityOK] != 2 {
		t.Errorf("summary = %v", report.Summary)
	}
	var ds *finding
	for i := range report.Findings {
		if report.Findings[i].Object == "kube-system/tolerate-all" {
			ds = &report.Findings[i]
		}
	}
	if ds == nil || strings.Join(ds.Nodes, ",") != "flotilla-a,flotilla-b" || !strings.Contains(ds.Fix, "operator: NotIn") {
		t.Errorf("tolerate-all finding = %+v", ds)
	}
	if _, err := doctorWith(t, c, "-o", "yaml"); err == nil || !strings.Contains(err.Error(), "want json") {
		t.Errorf("unknown output: err = %v", err)
	}
}

func TestDoctorOnACleanPrimary(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.ConfigurationName}}).Build()
	out, err := doctorWith(t, c)
	if err != nil {
		t.Fatalf("doctor failed: %v\n%s", err, out)
	}
	for _, w := range []string{"INFO  no virtual nodes", "OK    no DaemonSet can run on virtual nodes (0 DaemonSets, 0 virtual nodes)",
		"OK    no proxy pod is Pending (0 proxy pods)", "Summary: 0 errors, 0 warnings, 1 info, 3 OK"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestDoctorKeepsCheckingWhenAListIsForbidden(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(primaryObjects()...).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*appsv1.DaemonSetList); ok {
				return apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "daemonsets"}, "", errors.New("no"))
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
	out, err := doctorWith(t, c)
	if !errors.Is(err, errDoctorFound) {
		t.Fatalf("err = %v", err)
	}
	for _, w := range []string{"ERROR listing DaemonSets: daemonsets.apps is forbidden", "WARN  proxy demo/unbound", "OK    2 virtual nodes"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestDoctorHelpSaysWhatItChecks(t *testing.T) {
	out, err := run(t, "doctor", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"daemonsets", "virtual-nodes", "proxies", "MutatingWebhookConfiguration flotilla",
		"type NotIn [virtual-kubelet]", "non-zero", "--output"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor --help lacks %q:\n%s", want, out)
		}
	}
	if out, _ := run(t, "--help"); !strings.Contains(out, "doctor") {
		t.Errorf("flotillactl --help does not list doctor:\n%s", out)
	}
}
