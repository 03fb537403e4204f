package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

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
	// The advice is what the DaemonSet webhook does to a template without node affinity (the
	// webhook is linked into this test only, never into flotillactl).
	var spec corev1.PodSpec
	webhook.ExcludeVirtualNodes(&spec)
	raw, err := yaml.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"affinity": spec.Affinity}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got != string(raw) {
		t.Errorf("exclusion YAML:\n%s\nthe webhook's:\n%s", got, raw)
	}
}

func TestTunnelFinding(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	pulled := func(tunnel *flotillav1.TunnelStatus) *flotillav1.ClusterDetector {
		return &flotillav1.ClusterDetector{ObjectMeta: metav1.ObjectMeta{Name: "edge"},
			Status: flotillav1.ClusterDetectorStatus{Mode: flotillav1.ModePull, Tunnel: tunnel}}
	}
	for name, tc := range map[string]struct {
		cd       *flotillav1.ClusterDetector
		severity severity
		message  string
	}{
		"dialled":     {cd: &flotillav1.ClusterDetector{ObjectMeta: metav1.ObjectMeta{Name: "eu"}}},
		"never heard": {cd: pulled(nil), severity: severityWarning, message: "cluster edge is in pull mode and its agent holds no tunnel"},
		"down": {cd: pulled(&flotillav1.TunnelStatus{Since: &since, LastError: "keepalive: i/o deadline reached", Connects: 3}),
			severity: severityWarning, message: "cluster edge is in pull mode and its agent holds no tunnel since 2026-11-29T10:00:00Z: keepalive: i/o deadline reached"},
		"up first time": {cd: pulled(&flotillav1.TunnelStatus{Connected: true, Since: &since, Connects: 1}),
			severity: severityOK, message: "cluster edge: pull mode, tunnel up since 2026-11-29T10:00:00Z"},
		"up again": {cd: pulled(&flotillav1.TunnelStatus{Connected: true, Since: &since, Connects: 3, RoundTrip: &metav1.Duration{Duration: 1500 * time.Microsecond}}),
			severity: severityOK, message: "cluster edge: pull mode, tunnel up since 2026-11-29T10:00:00Z, round trip 1.5ms, 2 reconnects"},
	} {
		t.Run(name, func(t *testing.T) {
			f, ok := tunnelFinding(tc.cd)
			if ok != (tc.message != "") {
				t.Fatalf("reported %v (%+v), want %v", ok, f, tc.message != "")
			}
			if !ok {
				return
			}
			if f.Severity != tc.severity || f.Message != tc.message || f.Cluster != "edge" {
				t.Errorf("got %s %q (cluster %q), want %s %q", f.Severity, f.Message, f.Cluster, tc.severity, tc.message)
			}
			if (f.Fix != "") != (tc.severity == severityWarning) {
				t.Errorf("fix %q for a %s finding", f.Fix, f.Severity)
			}
		})
	}
}

func TestPendingProxyFinding(t *testing.T) {
	unbound := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"}}}}
	f := pendingProxyFinding(unbound)
	if f.Severity != severityWarning || f.Message != "proxy demo/web is Pending, not bound to a virtual node: Unschedulable: 0/3 nodes are available (its timeline: flotillactl trace pod demo/web)" {
		t.Errorf("unbound: %+v", f)
	}
	bound := unbound.DeepCopy()
	bound.Spec.NodeName, bound.Status.Conditions = "flotilla-a", nil
	bound.Status.Reason, bound.Status.Message = "DelegatePending", "image pulling"
	f = pendingProxyFinding(bound)
	if f.Severity != severityInfo || f.Message != "proxy demo/web is Pending on flotilla-a, waiting for its delegate: DelegatePending: image pulling (its timeline: flotillactl trace pod demo/web)" {
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
		kubeSystem("primary-id"),
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

// doctorWith runs doctor against a primary, with a kubeconfig that has no context for any secondary.
func doctorWith(t *testing.T, c client.Client, args ...string) (string, error) {
	t.Helper()
	return doctorWithSecondaries(t, c, kubeContexts{}, args...)
}

func doctorWithSecondaries(t *testing.T, c client.Client, kc kubeContexts, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := newDoctorCommand(doctorDeps{
		primary:          func() (client.Client, error) { return c, nil },
		contexts:         func() (kubeContexts, error) { return kc, nil },
		secondaryTimeout: 200 * time.Millisecond,
	})
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
		"WARN  proxy demo/unbound is Pending, not bound to a virtual node: Waiting: no secondary fits (its timeline: flotillactl trace pod demo/unbound)\n",
		"INFO  proxy demo/bound is Pending on flotilla-a, waiting for its delegate: Waiting: no secondary fits (its timeline: flotillactl trace pod demo/bound)\n",
		"INFO  delegates in a not checked: your kubeconfig has no context a; name one with --secondary-context a=CONTEXT\n",
		"INFO  delegates in b not checked",
		"ERROR MutatingWebhookConfiguration flotilla is missing",
		"\nSummary: 1 error, 4 warnings, 3 info, 1 OK\n",
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
	objs := append(primaryObjects(), &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: flotillav1.WebhookConfigurationName},
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
	yamlOut, err := doctorWith(t, c, "-o", "yaml")
	if err != nil {
		t.Fatalf("doctor -o yaml failed: %v\n%s", err, yamlOut)
	}
	var fromYAML doctorReport
	if err := yaml.Unmarshal([]byte(yamlOut), &fromYAML); err != nil || !reflect.DeepEqual(fromYAML, report) {
		t.Errorf("-o yaml is not the JSON document (%v):\n%s", err, yamlOut)
	}
	if _, err := doctorWith(t, c, "-o", "wide"); err == nil || !strings.Contains(err.Error(), "json, yaml") {
		t.Errorf("unknown output: err = %v", err)
	}
}

// With the chart's fullnameOverride, the webhook configuration is the one the manager's
// Deployment names: no false "missing".
func TestDoctorFindsTheWebhookConfigurationByTheManagersNames(t *testing.T) {
	objs := append(primaryObjects(),
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: "fleet-manager",
			Labels: map[string]string{"app.kubernetes.io/name": "flotilla"}, Annotations: map[string]string{flotillav1.AnnotationNamePrefix: "fleet"}}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "fleet"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "pods.flotilla.dev"}}})
	c := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(objs...).Build()
	out, err := doctorWith(t, c)
	if err != nil || !strings.Contains(out, "OK    MutatingWebhookConfiguration fleet is present") {
		t.Fatalf("err = %v; output:\n%s", err, out)
	}
}

func TestDoctorOnACleanPrimary(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: flotillav1.WebhookConfigurationName}}).Build()
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
	for _, want := range []string{"daemonsets", "virtual-nodes", "proxies", "delegates", "MutatingWebhookConfiguration (flotilla, or the name the chart's",
		"type NotIn [virtual-kubelet]", "non-zero", "--output", "--secondary-context", "never the manager's credentials"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor --help lacks %q:\n%s", want, out)
		}
	}
	if out, _ := run(t, "--help"); !strings.Contains(out, "doctor") {
		t.Errorf("flotillactl --help does not list doctor:\n%s", out)
	}
}

// kubeSystem is a cluster's kube-system namespace, whose UID is the cluster's ID.
func kubeSystem(id string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: types.UID(id)}}
}

// proxyPod is a proxy in namespace demo, bound to node ("" for none).
func proxyPod(name, uid, node string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, UID: types.UID(uid),
		Labels: map[string]string{flotillav1.LabelProxy: "true"}},
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
		Status: corev1.PodStatus{Phase: phase}}
}

// delegatePod is the delegate, in a secondary, of the proxy demo/name with UID proxyUID.
func delegatePod(primaryID, name, proxyUID string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name,
		Labels:      map[string]string{flotillav1.LabelPrimary: primaryID},
		Annotations: map[string]string{flotillav1.AnnotationProxyUID: proxyUID}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
}

func pods(ps ...*corev1.Pod) []corev1.Pod {
	out := make([]corev1.Pod, 0, len(ps))
	for _, p := range ps {
		out = append(out, *p)
	}
	return out
}

func terminating(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	now := metav1.Now()
	p.DeletionTimestamp, p.Finalizers = &now, []string{flotillav1.FinalizerDelegate}
	return p
}

func TestDelegateFindings(t *testing.T) {
	const node = "flotilla-a"
	web := proxyPod("web", "uid-web", node, corev1.PodRunning)
	api := proxyPod("api", "uid-api", node, corev1.PodRunning)
	pending := proxyPod("new", "uid-new", node, corev1.PodPending)
	elsewhere := proxyPod("db", "uid-db", "flotilla-b", corev1.PodRunning)
	failed := web.DeepCopy()
	failed.Status.Phase = corev1.PodFailed
	orphanWarning := "WARN delegate demo/old in a has no proxy: the manager's sweep deletes it; if it stays, is the manager running and flotilla-a Ready?"
	for name, tc := range map[string]struct {
		before, after, delegates []corev1.Pod
		want                     []string
	}{
		"one delegate per proxy": {
			before: pods(web, api, pending, elsewhere), after: pods(web, api, pending, elsewhere),
			delegates: pods(delegatePod("p", "web", "uid-web"), delegatePod("p", "api", "uid-api"), delegatePod("p", "new", "uid-new")),
			want:      []string{"OK a: 3 delegates, one per proxy"},
		},
		"nothing on either side": {want: []string{"OK a: 0 delegates, one per proxy"}},
		"Running proxies without delegates, sorted": {
			before: pods(web, api), after: pods(web, api),
			want: []string{
				"ERROR proxy demo/api is Running on flotilla-a but a holds no delegate of it: the manager re-elects it once it sees the loss; if this stays, is the manager running?",
				"ERROR proxy demo/web is Running on flotilla-a but a holds no delegate of it: the manager re-elects it once it sees the loss; if this stays, is the manager running?",
			},
		},
		"a Pending proxy waits for its delegate": {
			before: pods(pending), after: pods(pending), want: []string{"OK a: 0 delegates, one per proxy"},
		},
		"a terminating proxy may have lost its delegate": {
			before: pods(terminating(web)), after: pods(terminating(web)), want: []string{"OK a: 0 delegates, one per proxy"},
		},
		"a proxy of another node is not this cluster's": {
			before: pods(elsewhere), after: pods(elsewhere), want: []string{"OK a: 0 delegates, one per proxy"},
		},
		"a proxy the manager failed between the reads": {
			before: pods(web), after: pods(failed), want: []string{"OK a: 0 delegates, one per proxy"},
		},
		"a proxy deleted between the reads": {
			before: pods(web), want: []string{"OK a: 0 delegates, one per proxy"},
		},
		"a proxy that started between the reads": {
			before: pods(proxyPod("web", "uid-web", node, corev1.PodPending)), after: pods(web),
			want: []string{"OK a: 0 delegates, one per proxy"},
		},
		"a delegate without proxy": {
			before: pods(web), after: pods(web),
			delegates: pods(delegatePod("p", "web", "uid-web"), delegatePod("p", "old", "uid-gone")),
			want:      []string{orphanWarning},
		},
		"a delegate whose proxy came after the first read": {
			after: pods(web), delegates: pods(delegatePod("p", "web", "uid-web")), want: []string{"OK a: 1 delegate, one per proxy"},
		},
		"a delegate whose proxy is bound to another node": {
			before: pods(elsewhere), after: pods(elsewhere), delegates: pods(delegatePod("p", "old", "uid-db")),
			want: []string{orphanWarning},
		},
		"a terminating delegate without proxy is already going": {
			delegates: pods(terminating(delegatePod("p", "old", "uid-gone"))), want: []string{"OK a: 0 delegates, one per proxy"},
		},
		"a labelled pod without proxy UID is no delegate": {
			delegates: pods(delegatePod("p", "old", "")), want: []string{"OK a: 0 delegates, one per proxy"},
		},
		"the delegate of a previous incarnation: error first": {
			before:    pods(proxyPod("old", "uid-new-incarnation", node, corev1.PodRunning)),
			after:     pods(proxyPod("old", "uid-new-incarnation", node, corev1.PodRunning)),
			delegates: pods(delegatePod("p", "old", "uid-gone")),
			want: []string{
				"ERROR proxy demo/old is Running on flotilla-a but a holds no delegate of it: the manager re-elects it once it sees the loss; if this stays, is the manager running?",
				orphanWarning,
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, f := range delegateFindings("a", node, tc.before, tc.after, tc.delegates) {
				if f.Check != checkDelegates || f.Cluster != "a" {
					t.Errorf("finding %+v: want check %s, cluster a", f, checkDelegates)
				}
				got = append(got, string(f.Severity)+" "+f.Message)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestSecondaryContextFor(t *testing.T) {
	gke := "gke_my-project_europe-west1-b_prod"
	names := []string{"primary", "eu", gke}
	for name, tc := range map[string]struct {
		cluster   string
		overrides map[string]string
		want      string
		ok        bool
	}{
		"the context named like the cluster":    {cluster: "eu", want: "eu", ok: true},
		"the context its name was derived from": {cluster: nameOf(t, gke), want: gke, ok: true},
		"--secondary-context wins":              {cluster: "eu", overrides: map[string]string{"eu": "primary"}, want: "primary", ok: true},
		"--secondary-context to any name":       {cluster: "us", overrides: map[string]string{"us": "missing"}, want: "missing", ok: true},
		"no context":                            {cluster: "us"},
	} {
		t.Run(name, func(t *testing.T) {
			if got, ok := secondaryContextFor(tc.cluster, tc.overrides, names); got != tc.want || ok != tc.ok {
				t.Errorf("secondaryContextFor(%s) = %q, %v; want %q, %v", tc.cluster, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestParseSecondaryContexts(t *testing.T) {
	got, err := parseSecondaryContexts([]string{"eu=gke_p_z_eu", "us=odd=name", "eu=gke_p_z_eu"})
	if err != nil || len(got) != 2 || got["eu"] != "gke_p_z_eu" || got["us"] != "odd=name" {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range [][]string{{"eu"}, {"=ctx"}, {"eu="}, {"eu=a", "eu=b"}} {
		if _, err := parseSecondaryContexts(bad); err == nil || !strings.Contains(err.Error(), "--secondary-context") {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
}

// fleet is a primary (ID primary-id) with virtual nodes for clusters ok, broken, absent, down,
// wrong and eu, their ClusterDetectors, a proxy on each, and the user's contexts for the
// secondaries: ok and broken by their names, eu only through --secondary-context, down never
// answering, wrong reaching another cluster, absent none.
func fleet(t *testing.T) (client.Client, kubeContexts) {
	t.Helper()
	const primaryID = "primary-id"
	clusterNames := []string{"ok", "broken", "absent", "down", "wrong", "eu"}
	objs := []client.Object{kubeSystem(primaryID),
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: flotillav1.WebhookConfigurationName}}}
	for _, name := range clusterNames {
		cd := &flotillav1.ClusterDetector{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: name},
			Spec: flotillav1.ClusterDetectorSpec{Context: name}}
		cd.Status.ClusterID = "id-" + name
		objs = append(objs, virtualNode(name, corev1.ConditionTrue), cd,
			proxyPod("web-"+name, "uid-web-"+name, flotillav1.VirtualNodeName(name), corev1.PodRunning))
	}
	primary := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(objs...).WithStatusSubresource(&flotillav1.ClusterDetector{}).Build()

	secondary := func(id string, objs ...client.Object) client.Client {
		return fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(append(objs, kubeSystem(id))...).Build()
	}
	hangs := fake.NewClientBuilder().WithScheme(cliScheme).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, _ client.WithWatch, _ client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
			<-ctx.Done()
			return ctx.Err()
		},
	}).Build()
	clients := map[string]client.Client{
		"ok": secondary("id-ok", delegatePod(primaryID, "web-ok", "uid-web-ok"),
			// Another primary's delegate is none of this one's business.
			delegatePod("other-primary", "stranger", "uid-stranger")),
		"broken":  secondary("id-broken", delegatePod(primaryID, "gone", "uid-gone")),
		"down":    hangs,
		"wrong":   secondary("id-elsewhere"),
		"prod-eu": secondary("id-eu", delegatePod(primaryID, "web-eu", "uid-web-eu")),
	}
	kc := kubeContexts{names: []string{"primary", "ok", "broken", "down", "wrong", "prod-eu"},
		connect: func(name string, timeout time.Duration) (client.Client, error) {
			if timeout != 200*time.Millisecond {
				t.Errorf("connect %s with timeout %s", name, timeout)
			}
			if name == "primary" {
				return primary, nil
			}
			if c, ok := clients[name]; ok {
				return c, nil
			}
			return nil, fmt.Errorf("context %q is not in the kubeconfig", name)
		}}
	return primary, kc
}

func TestDoctorChecksEachSecondarysDelegatesWithTheUsersContexts(t *testing.T) {
	primary, kc := fleet(t)
	start := time.Now()
	out, err := doctorWithSecondaries(t, primary, kc, "--secondary-context", "eu=prod-eu", "--secondary-context", "typo=ok",
		"--secondary-context", "wrong=primary")
	if !errors.Is(err, errDoctorFound) {
		t.Fatalf("err = %v, want errDoctorFound; output:\n%s", err, out)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("doctor took %s: a secondary that does not answer must not stall it", elapsed)
	}
	// In virtual-node order (absent, broken, down, eu, ok, wrong), after the flag that matched no cluster.
	want := []string{
		"WARN  --secondary-context typo=ok names no cluster with a virtual node\n",
		"INFO  delegates in absent not checked: your kubeconfig has no context absent; name one with --secondary-context absent=CONTEXT\n",
		"ERROR proxy demo/web-broken is Running on flotilla-broken but broken holds no delegate of it: the manager re-elects it once it sees the loss; if this stays, is the manager running?\n",
		"WARN  delegate demo/gone in broken has no proxy: the manager's sweep deletes it; if it stays, is the manager running and flotilla-broken Ready?\n",
		"WARN  delegates in down not checked: context down: reading the kube-system namespace (its UID is the cluster's ID): context deadline exceeded (no answer within 200ms)\n",
		"OK    eu: 1 delegate, one per proxy\n",
		"OK    ok: 1 delegate, one per proxy\n",
		"WARN  delegates in wrong not checked: context primary: it reaches the primary, not wrong; name its context with --secondary-context wrong=CONTEXT\n",
		"Summary: 1 error, 4 warnings, 1 info, 6 OK\n",
	}
	last := -1
	for _, w := range want {
		i := strings.Index(out, w)
		if i < 0 {
			t.Errorf("output lacks %q:\n%s", w, out)
			continue
		}
		if i < last {
			t.Errorf("%q is out of order:\n%s", w, out)
		}
		last = i
	}
	if strings.Contains(out, "stranger") {
		t.Errorf("another primary's delegate is reported:\n%s", out)
	}

	// Without the flag, wrong's own context reaches a cluster other than the registered one.
	out, _ = doctorWithSecondaries(t, primary, kc, "-o", "json")
	var report doctorReport
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	var wrong, missing *finding
	for i := range report.Findings {
		switch f := &report.Findings[i]; {
		case f.Check == checkDelegates && f.Cluster == "wrong":
			wrong = f
		case f.Check == checkDelegates && f.Severity == severityError:
			missing = f
		}
	}
	if wrong == nil || wrong.Severity != severityWarning || wrong.Message != "delegates in wrong not checked: context wrong: it reaches cluster id-elsewhere, "+
		"but wrong is cluster id-wrong (its ClusterDetector's clusterID); name its context with --secondary-context wrong=CONTEXT" {
		t.Errorf("wrong cluster finding = %+v", wrong)
	}
	if missing == nil || missing.Cluster != "broken" || missing.Object != "demo/web-broken" {
		t.Errorf("missing delegate finding = %+v", missing)
	}
	if report.Summary[severityInfo] != 2 { // absent, and eu without its flag
		t.Errorf("summary = %v", report.Summary)
	}
}

func TestDoctorRefusesAMalformedSecondaryContext(t *testing.T) {
	primary, kc := fleet(t)
	if _, err := doctorWithSecondaries(t, primary, kc, "--secondary-context", "eu"); err == nil || !strings.Contains(err.Error(), "want CLUSTER=CONTEXT") {
		t.Errorf("err = %v", err)
	}
}

func TestDoctorReportsADelegatesCheckItCannotRun(t *testing.T) {
	primary, kc := fleet(t)
	c := interceptor.NewClient(primary.(client.WithWatch), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*flotillav1.ClusterDetectorList); ok {
				return apierrors.NewForbidden(schema.GroupResource{Group: flotillav1.GroupVersion.Group, Resource: "clusterdetectors"}, "", errors.New("no"))
			}
			return c.List(ctx, list, opts...)
		},
	})
	out, err := doctorWithSecondaries(t, c, kc)
	if !errors.Is(err, errDoctorFound) || !strings.Contains(out, "ERROR listing ClusterDetectors: clusterdetectors.flotilla.dev is forbidden") ||
		!strings.Contains(out, "OK    6 virtual nodes") {
		t.Errorf("err = %v, output:\n%s", err, out)
	}
}

func TestUserContextsBoundEveryRequest(t *testing.T) {
	// A secondary that accepts connections and never answers, reached with a context of no deadline:
	// the client's own discovery carries no context, so only the request timeout can end it.
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["hung"] = &clientcmdapi.Cluster{Server: srv.URL}
	cfg.AuthInfos["hung"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["hung"] = &clientcmdapi.Context{Cluster: "hung", AuthInfo: "hung"}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	kc, err := (&GlobalOptions{Kubeconfig: path}).userContexts()
	if err != nil || strings.Join(kc.names, ",") != "hung" {
		t.Fatalf("contexts %v, %v", kc.names, err)
	}
	c, err := kc.connect("hung", 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.List(t.Context(), &corev1.PodList{}); err == nil {
		t.Fatal("a secondary that never answers listed pods")
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("the list took %s", elapsed)
	}
	if _, err := kc.connect("missing", time.Second); err == nil || !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf("missing context: err = %v", err)
	}
}
