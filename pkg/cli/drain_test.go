package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// drainFixture is a primary with eu's virtual node and objs, its evictions and lists passing
// through funcs.
func drainFixture(funcs interceptor.Funcs, objs ...client.Object) client.WithWatch {
	objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: flotillav1.VirtualNodeName("eu")}})
	return fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(objs...).WithInterceptorFuncs(funcs).Build()
}

// runDrain drains eu on a fake clock that moves on whenever the drain waits, so backoff and the
// ETA are measured in the clock's time, not the test's.
func runDrain(t *testing.T, primary client.Client, o drainOptions) (string, error) {
	t.Helper()
	fc := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	var out bytes.Buffer
	d := newDrainer(primary, "eu", o, &out)
	d.clock = fc
	if d.o.timeout == 0 {
		d.o.timeout = 10 * time.Second // of the test's own time: a drain that hangs fails it
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if fc.HasWaiters() {
				fc.Step(d.poll)
			}
			time.Sleep(50 * time.Microsecond)
		}
	})
	err := d.run(t.Context())
	close(done)
	wg.Wait()
	return out.String(), err
}

func objects(objs ...corev1.Pod) []client.Object {
	out := make([]client.Object, 0, len(objs))
	for i := range objs {
		out = append(out, &objs[i])
	}
	return out
}

func leftOn(t *testing.T, primary client.Client) []string {
	t.Helper()
	proxies, err := boundProxies(t.Context(), primary, flotillav1.VirtualNodeName("eu"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range proxies {
		names = append(names, p.Name)
	}
	return names
}

// A pod whose namespace is being deleted cannot be evicted (Forbidden, NamespaceTerminating): it
// goes with its namespace, and the drain waits for it as for any other instead of failing.
func TestDrainWaitsForAPodGoingWithItsNamespace(t *testing.T) {
	refusals := 0
	primary := drainFixture(interceptor.Funcs{SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, ev client.Object, opts ...client.SubResourceCreateOption) error {
		if obj.GetName() == "web-b" {
			if refusals++; refusals > 1 {
				_ = c.Delete(ctx, obj) // the namespace controller's deletion, meanwhile
			}
			err := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "web-b",
				errors.New("unable to create new content in namespace demo because it is being terminated"))
			err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: corev1.NamespaceTerminatingCause,
				Message: "namespace demo is being terminated", Field: "metadata.namespace"})
			return err
		}
		return c.SubResource(sub).Create(ctx, obj, ev, opts...)
	}}, objects(drainPod("web-a", byReplicaSet), drainPod("web-b", byReplicaSet))...)
	out, err := runDrain(t, primary, drainOptions{})
	if err != nil {
		t.Fatalf("drain: %v\n%s", err, out)
	}
	for _, want := range []string{"its namespace demo being deleted (the pod goes with it)", "Drained eu"} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not say %q:\n%s", want, out)
		}
	}
	if l := leftOn(t, primary); len(l) != 0 {
		t.Errorf("left on the node: %v", l)
	}
}

// budgetRefusal is the API server's 429 for an eviction a PodDisruptionBudget forbids.
func budgetRefusal() error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause,
		Message: "The disruption budget web needs 2 healthy pods and has 2 currently"})
	return err
}

var webBudget = &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"},
	Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}

// A PodDisruptionBudget's refusals (429) are retried with backoff and said, naming the budget;
// the drain ends once every pod is evicted, the virtual node cordoned.
func TestDrainRetriesWhatABudgetRefusesAndNamesIt(t *testing.T) {
	refused := map[string]int{}
	var mu sync.Mutex
	primary := drainFixture(interceptor.Funcs{SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, ev client.Object, opts ...client.SubResourceCreateOption) error {
		mu.Lock()
		defer mu.Unlock()
		if obj.GetName() == "web-a" && refused["web-a"] < 3 {
			refused["web-a"]++
			return budgetRefusal()
		}
		if e := ev.(*policyv1.Eviction); e.DeleteOptions == nil || e.DeleteOptions.Preconditions == nil || *e.DeleteOptions.Preconditions.UID != obj.GetUID() {
			return errors.New("an eviction without the pod's UID as precondition could evict its next incarnation")
		}
		return c.SubResource(sub).Create(ctx, obj, ev, opts...)
	}}, append(objects(drainPod("web-a", byReplicaSet), drainPod("web-b", byReplicaSet)), webBudget)...)
	out, err := runDrain(t, primary, drainOptions{})
	if err != nil {
		t.Fatalf("drain: %v\n%s", err, out)
	}
	t.Log(out)
	if refused["web-a"] != 3 {
		t.Errorf("web-a's eviction was tried %d times after refusals, want 3", refused["web-a"])
	}
	for _, want := range []string{"flotilla-eu cordoned", "1 blocked by PodDisruptionBudget demo/web (The disruption budget web needs 2 healthy pods",
		"Evicted demo/web-a", "Evicted demo/web-b", "Drained eu: 2 pod(s) moved", "ETA"} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not say %q:\n%s", want, out)
		}
	}
	if l := leftOn(t, primary); len(l) != 0 {
		t.Errorf("left on the node: %v", l)
	}
	if !cordoned(t, primary) {
		t.Error("the virtual node is not cordoned")
	}
}

// At-most-once pods move one at a time: each eviction only once the previous pod's proxy is gone
// (the fake "proxy controller" lets a terminating proxy go one list later).
func TestDrainMovesAtMostOncePodsOneAtATime(t *testing.T) {
	var order []string
	var mu sync.Mutex
	withFinalizer := func(p *corev1.Pod) { p.Finalizers = []string{flotillav1.FinalizerDelegate} }
	primary := drainFixture(interceptor.Funcs{
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, ev client.Object, opts ...client.SubResourceCreateOption) error {
			mu.Lock()
			defer mu.Unlock()
			var all corev1.PodList
			if err := c.List(ctx, &all); err != nil {
				return err
			}
			for _, p := range all.Items {
				if p.DeletionTimestamp != nil {
					return fmt.Errorf("%s evicted while %s is still there (terminating)", obj.GetName(), p.Name)
				}
			}
			order = append(order, obj.GetName())
			return c.SubResource(sub).Create(ctx, obj, ev, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			// The proxy controller: a terminating proxy's delegate is gone, so is the proxy.
			var all corev1.PodList
			if err := c.List(ctx, &all); err != nil {
				return err
			}
			for i := range all.Items {
				if p := &all.Items[i]; p.DeletionTimestamp != nil {
					p.Finalizers = nil
					if err := c.Update(ctx, p); err != nil {
						return err
					}
				}
			}
			return c.List(ctx, list, opts...)
		},
	}, objects(drainPod("db-0", byStatefulSet, withFinalizer), drainPod("db-1", byStatefulSet, withFinalizer), drainPod("db-2", byStatefulSet, withFinalizer))...)
	out, err := runDrain(t, primary, drainOptions{})
	if err != nil {
		t.Fatalf("drain: %v\n%s", err, out)
	}
	if strings.Join(order, ",") != "db-2,db-1,db-0" {
		t.Errorf("evictions = %v, want db-2, db-1, db-0, one at a time", order)
	}
	if !strings.Contains(out, "at-most-once waiting their turn") {
		t.Errorf("the progress does not say that at-most-once pods wait:\n%s", out)
	}
}

// Refusals come before any change: no cordon, no eviction; --force and recreate let them go.
func TestDrainRefusesBeforeChangingAnything(t *testing.T) {
	evictions := 0
	count := interceptor.Funcs{SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, ev client.Object, opts ...client.SubResourceCreateOption) error {
		evictions++
		return c.SubResource(sub).Create(ctx, obj, ev, opts...)
	}}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "data-db-0",
		Annotations: map[string]string{flotillav1.AnnotationVolumeCluster: "eu"}}}
	objs := append(objects(drainPod("bare"), drainPod("db-0", byStatefulSet, withClaim("data-db-0")), drainPod("web-a", byReplicaSet)), claim)
	primary := drainFixture(count, objs...)
	out, err := runDrain(t, primary, drainOptions{})
	if err == nil {
		t.Fatalf("drain went ahead:\n%s", out)
	}
	for _, want := range []string{"nothing changed", "2 pod(s)", "demo/bare: refused: no controller owns it", "--force",
		"demo/db-0: refused: its claim(s) data-db-0", "flotilla.dev/on-volume-cluster-loss=recreate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal does not say %q: %v", want, err)
		}
	}
	if cordoned(t, primary) || evictions != 0 {
		t.Errorf("cordoned %t, %d evictions: a refusing drain must change nothing", cordoned(t, primary), evictions)
	}

	recreate := drainPod("db-0", byStatefulSet, withClaim("data-db-0"), annotated(flotillav1.AnnotationOnVolumeClusterLoss, flotillav1.OnVolumeClusterLossRecreate))
	primary = drainFixture(count, append(objects(drainPod("bare"), recreate, drainPod("web-a", byReplicaSet)), claim)...)
	out, err = runDrain(t, primary, drainOptions{force: true})
	if err != nil {
		t.Fatalf("--force with recreate: %v\n%s", err, out)
	}
	if l := leftOn(t, primary); len(l) != 0 {
		t.Errorf("left: %v", l)
	}
}

// --dry-run prints what would happen and changes nothing; it fails when it would refuse.
func TestDrainDryRun(t *testing.T) {
	evictions := 0
	primary := drainFixture(interceptor.Funcs{SubResourceCreate: func(context.Context, client.Client, string, client.Object, client.Object, ...client.SubResourceCreateOption) error {
		evictions++
		return nil
	}}, objects(drainPod("web-a", byReplicaSet), drainPod("db-0", byStatefulSet), drainPod("db-1", byStatefulSet), drainPod("bare"))...)
	out, err := runDrain(t, primary, drainOptions{dryRun: true})
	if err == nil || !strings.Contains(err.Error(), "would refuse 1 pod(s)") {
		t.Errorf("err = %v, want the refusal counted", err)
	}
	for _, want := range []string{"Dry run: nothing is changed", "cordon flotilla-eu", "evict demo/web-a (ReplicaSet web-7d4)",
		"evict one at a time, each once the previous one's delegate is gone (at-most-once): demo/db-1, demo/db-0", "refuse demo/bare: no controller owns it"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run does not say %q:\n%s", want, out)
		}
	}
	if cordoned(t, primary) || evictions != 0 || len(leftOn(t, primary)) != 4 {
		t.Errorf("a dry run changed something: cordoned %t, %d evictions", cordoned(t, primary), evictions)
	}
}

// A drain that cannot finish in time exits with an error listing what is left and why.
func TestDrainTimesOutListingWhatIsLeft(t *testing.T) {
	primary := drainFixture(interceptor.Funcs{SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, ev client.Object, opts ...client.SubResourceCreateOption) error {
		if obj.GetName() == "web-b" {
			return budgetRefusal()
		}
		return c.SubResource(sub).Create(ctx, obj, ev, opts...)
	}}, append(objects(drainPod("web-a", byReplicaSet), drainPod("web-b", byReplicaSet)), webBudget)...)
	out, err := runDrain(t, primary, drainOptions{timeout: 300 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline\n%s", err, out)
	}
	for _, want := range []string{"did not finish within 300ms", "1 pod(s) left on flotilla-eu", "demo/web-b: eviction refused by PodDisruptionBudget demo/web", "run it again"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
}

func TestUncordon(t *testing.T) {
	primary := drainFixture(interceptor.Funcs{})
	var out bytes.Buffer
	for _, on := range []bool{true, true, false, false} {
		if err := setCordon(t.Context(), primary, "eu", on, &out); err != nil {
			t.Fatal(err)
		}
		if cordoned(t, primary) != on {
			t.Errorf("after setCordon(%t): cordoned %t", on, !on)
		}
	}
	if !strings.Contains(out.String(), "flotilla-eu is already uncordoned") {
		t.Errorf("output:\n%s", out.String())
	}
	if err := setCordon(t.Context(), primary, "mars", false, &out); err == nil || !strings.Contains(err.Error(), "flotilla-mars") {
		t.Errorf("a cluster without a virtual node: %v", err)
	}
}

// remove drains first: its refusals stop it before anything is changed; --no-drain deletes the
// proxies as before.
func TestRemoveDrainsFirst(t *testing.T) {
	node := flotillav1.VirtualNodeName("eu")
	bare := proxyPod("bare", "bare-uid", node, corev1.PodRunning)
	primary := orphanFixture(t, bare)
	var out bytes.Buffer
	err := removeCluster(t.Context(), &GlobalOptions{}, primary, "eu", "eu", removeOptions{timeout: time.Second}, &out)
	if err == nil || !strings.Contains(err.Error(), "draining eu before removing it") || !strings.Contains(err.Error(), "--no-drain") {
		t.Fatalf("remove with a pod no controller owns: %v\n%s", err, out.String())
	}
	if cordoned(t, primary) {
		t.Error("remove cordoned before the drain's refusal")
	}
	out.Reset()
	// --no-drain: deleted at once (remove then stops at the unreachable secondary).
	_ = removeCluster(t.Context(), &GlobalOptions{}, primary, "eu", "eu", removeOptions{noDrain: true, timeout: time.Second}, &out)
	if l := leftOn(t, primary); len(l) != 0 || !cordoned(t, primary) {
		t.Errorf("--no-drain: left %v, cordoned %t\n%s", l, cordoned(t, primary), out.String())
	}
}

func TestDrainHelp(t *testing.T) {
	out, err := run(t, "cluster", "drain", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PodDisruptionBudget", "--force", "--dry-run", "--timeout", "one at a time", "recreate", "uncordon", "run again"} {
		if !strings.Contains(out, want) {
			t.Errorf("cluster drain --help does not say %q", want)
		}
	}
	out, err = run(t, "cluster", "remove", "--help")
	if err != nil || !strings.Contains(out, "--no-drain") {
		t.Errorf("cluster remove --help does not say --no-drain (%v)", err)
	}
}

// A budget that refuses one pod in a look is not asked about the other pods it blocked before
// until the next look.
func TestEvictDueAsksABudgetOncePerLook(t *testing.T) {
	calls := 0
	primary := drainFixture(interceptor.Funcs{SubResourceCreate: func(context.Context, client.Client, string, client.Object, client.Object, ...client.SubResourceCreateOption) error {
		calls++
		return budgetRefusal()
	}}, append(objects(drainPod("web-a", byReplicaSet), drainPod("web-b", byReplicaSet), drainPod("web-c", byReplicaSet)), webBudget)...)
	d := newDrainer(primary, "eu", drainOptions{}, &bytes.Buffer{})
	in, err := d.gather(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	plan := planDrain(in)
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	st := drainState{blocked: map[string]string{}, refusals: map[types.UID]int{}, retryAt: map[types.UID]time.Time{}, moving: map[types.UID]bool{}}
	if err := d.evictDue(t.Context(), plan, &st, now); err != nil || calls != 3 {
		t.Fatalf("first look: %d evictions (%v), want each pod tried once", calls, err)
	}
	calls = 0
	if err := d.evictDue(t.Context(), plan, &st, now.Add(time.Minute)); err != nil || calls != 1 {
		t.Errorf("a later look: %d evictions (%v), want 1: the budget refused, the others it blocks wait", calls, err)
	}
	calls = 0
	if err := d.evictDue(t.Context(), plan, &st, now.Add(time.Minute+100*time.Millisecond)); err != nil || calls != 0 {
		t.Errorf("before the retry: %d evictions (%v), want none", calls, err)
	}
}

// plannedPodFields are a DrainPlan's pod fields, by the names the document promises.
type plannedPodFields struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Controller string `json:"controller"`
	AtMostOnce bool   `json:"atMostOnce"`
	Reason     string `json:"reason"`
}

// drainPlanFields is a DrainPlan document, by the names it promises.
type drainPlanFields struct {
	Kind        string             `json:"kind"`
	Cluster     string             `json:"cluster"`
	VirtualNode string             `json:"virtualNode"`
	Evict       []plannedPodFields `json:"evict"`
	Held        []plannedPodFields `json:"held"`
	Moving      []plannedPodFields `json:"moving"`
	Ignored     []plannedPodFields `json:"ignored"`
	Refused     []plannedPodFields `json:"refused"`
}

// exactKeys fails unless the JSON object raw has exactly the keys want, each spelled so.
func exactKeys(t *testing.T, what string, raw []byte, want ...string) map[string]json.RawMessage {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatalf("%s is not a JSON object: %v\n%s", what, err, raw)
	}
	got := slices.Sorted(maps.Keys(fields))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s has the fields %v, want %v", what, got, want)
	}
	return fields
}

// --dry-run -o json prints the plan as one document, -o yaml the same; the dry run still fails
// when it would refuse, after printing, and changes nothing.
func TestDrainDryRunPrintsThePlanAsOneDocument(t *testing.T) {
	evictions := 0
	primary := drainFixture(interceptor.Funcs{SubResourceCreate: func(context.Context, client.Client, string, client.Object, client.Object, ...client.SubResourceCreateOption) error {
		evictions++
		return nil
	}}, objects(drainPod("web-a", byReplicaSet), drainPod("db-0", byStatefulSet), drainPod("db-1", byStatefulSet), drainPod("bare"),
		drainPod("agent", controlledBy("DaemonSet", "agent")))...)
	out, err := runDrain(t, primary, drainOptions{dryRun: true, output: "json"})
	if err == nil || !strings.Contains(err.Error(), "would refuse 1 pod(s)") {
		t.Errorf("err = %v, want the refusal counted after the document", err)
	}
	fields := exactKeys(t, "the DrainPlan", []byte(out), "kind", "cluster", "virtualNode", "evict", "held", "moving", "ignored", "refused")
	if string(fields["moving"]) != "[]" {
		t.Errorf("an empty list prints %s, want []", fields["moving"])
	}
	var evict []json.RawMessage
	if err := json.Unmarshal(fields["evict"], &evict); err != nil || len(evict) == 0 {
		t.Fatalf("evict = %s (%v)", fields["evict"], err)
	}
	exactKeys(t, "an evicted pod", evict[0], "namespace", "name", "controller", "atMostOnce", "reason")

	var fromJSON drainPlanFields
	if err := json.Unmarshal([]byte(out), &fromJSON); err != nil {
		t.Fatal(err)
	}
	name := func(ps []plannedPodFields) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Namespace+"/"+p.Name)
		}
		return out
	}
	if fromJSON.Kind != "DrainPlan" || fromJSON.Cluster != "eu" || fromJSON.VirtualNode != flotillav1.VirtualNodeName("eu") {
		t.Errorf("kind, cluster, virtualNode = %q, %q, %q", fromJSON.Kind, fromJSON.Cluster, fromJSON.VirtualNode)
	}
	for what, tc := range map[string]struct{ got, want []string }{
		"evict":   {name(fromJSON.Evict), []string{"demo/web-a", "demo/db-1"}},
		"held":    {name(fromJSON.Held), []string{"demo/db-0"}},
		"ignored": {name(fromJSON.Ignored), []string{"demo/agent"}},
		"refused": {name(fromJSON.Refused), []string{"demo/bare"}},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s = %v, want %v", what, tc.got, tc.want)
		}
	}
	if web := fromJSON.Evict[0]; web.Controller != "ReplicaSet/web-7d4" || web.AtMostOnce {
		t.Errorf("web-a = %+v, want its controller and not at-most-once", web)
	}
	if db := fromJSON.Held[0]; !db.AtMostOnce || !strings.Contains(db.Reason, "waits until demo/db-1 is gone") {
		t.Errorf("db-0 = %+v, want at-most-once, waiting for db-1", db)
	}
	if bare := fromJSON.Refused[0]; bare.Controller != "" || !strings.Contains(bare.Reason, "no controller owns it") {
		t.Errorf("bare = %+v, want the refusal's reason", bare)
	}

	out, err = runDrain(t, primary, drainOptions{dryRun: true, output: "yaml"})
	if err == nil {
		t.Error("-o yaml: the refusing dry run succeeded")
	}
	var fromYAML drainPlanFields
	if err := yaml.Unmarshal([]byte(out), &fromYAML); err != nil {
		t.Fatalf("-o yaml is not YAML: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(fromYAML, fromJSON) {
		t.Errorf("-o yaml says %+v, -o json %+v", fromYAML, fromJSON)
	}
	if cordoned(t, primary) || evictions != 0 || len(leftOn(t, primary)) != 5 {
		t.Errorf("a dry run changed something: cordoned %t, %d evictions", cordoned(t, primary), evictions)
	}
}
