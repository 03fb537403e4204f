package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/clusters/views"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

func rebalanceFixture(t *testing.T, inUS int) client.Client {
	t.Helper()
	node := func(cluster string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: flotillav1.VirtualNodeName(cluster), Labels: map[string]string{flotillav1.LabelCluster: cluster}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourcePods: resource.MustParse("1000")}}}
	}
	objs := []client.Object{node("eu"), node("us")}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range inUS {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("web-%d", i),
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(i) * time.Minute)),
			Labels:            map[string]string{flotillav1.LabelProxy: "true", "app": "web"},
			Annotations:       map[string]string{flotillav1.AnnotationElect: ""},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-rs", UID: types.UID("rs"), Controller: ptr.To(true)}}},
			Spec:   corev1.PodSpec{NodeName: flotillav1.VirtualNodeName("us"), Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}})
	}
	return fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(objs...).Build()
}

func TestRebalanceDryRunPrintsThePlanAndEvictsNothing(t *testing.T) {
	primary := rebalanceFixture(t, 4)
	var out bytes.Buffer
	if err := runRebalance(t.Context(), primary, rebalanceOptions{dryRun: true, timeout: time.Minute, poll: time.Millisecond}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"shop/replicaset web-rs", "us=4", "eu=2,us=2", "web-3 us->eu", "web-2 us->eu", "2 move(s) planned (dry run: nothing evicted)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, out.String())
		}
	}
	var pods corev1.PodList
	if err := primary.List(t.Context(), &pods); err != nil || len(pods.Items) != 4 {
		t.Fatalf("a dry run evicted: %d pods left (%v)", len(pods.Items), err)
	}
}

func TestRebalanceOfABalancedSplitMovesNothing(t *testing.T) {
	primary := rebalanceFixture(t, 1)
	var out bytes.Buffer
	if err := runRebalance(t.Context(), primary, rebalanceOptions{timeout: time.Minute, poll: time.Millisecond}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Balanced: 0 pod(s) moved") {
		t.Errorf("output: %s", out.String())
	}
}

func TestRebalanceRefusesABadSelector(t *testing.T) {
	err := runRebalance(t.Context(), rebalanceFixture(t, 0), rebalanceOptions{selector: "app in (", timeout: time.Minute}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--selector") {
		t.Fatalf("err = %v", err)
	}
}

// flotillactl rebalance and the manager's --rebalance-on-return plan the same moves for the same
// pods: both judge with placement.Rebalance, flotillactl over the virtual nodes, the manager over
// the views it gathers from its registry (with each secondary's nodes) and the same virtual nodes.
func TestRebalancePlansAsTheManagerDoes(t *testing.T) {
	primary := rebalanceFixture(t, 5)
	plans, _, err := planRebalance(t.Context(), primary, "shop", labels.Everything())
	if err != nil || len(plans) != 1 {
		t.Fatalf("flotillactl's plans %+v, %v", plans, err)
	}
	var nodes corev1.NodeList
	if err := primary.List(t.Context(), &nodes); err != nil {
		t.Fatal(err)
	}
	var snaps []clusters.Snapshot
	for _, c := range []string{"eu", "us"} {
		snaps = append(snaps, clusters.Snapshot{Name: c, Role: clusters.RoleSecondary, ID: c, Status: flotillav1.ClusterRunning, CapacitySynced: true,
			Capacity: clusters.Capacity{Nodes: []clusters.NodeCapacity{{Name: c + "-n0",
				Free: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourcePods: resource.MustParse("1000")}}}}})
	}
	gathered := views.FromSnapshots(snaps)
	for i := range gathered {
		for j := range nodes.Items {
			if nodes.Items[j].Name == flotillav1.VirtualNodeName(gathered[i].Name) {
				placement.WithVirtualNode(&gathered[i], &nodes.Items[j], time.Now())
			}
		}
	}
	var pods corev1.PodList
	if err := primary.List(t.Context(), &pods); err != nil {
		t.Fatal(err)
	}
	groups, _ := placement.Groups(pods.Items)
	manager, err := placement.Rebalance(t.Context(), groups[types.UID("rs")], gathered)
	if err != nil {
		t.Fatal(err)
	}
	moves := func(s placement.Split) []string {
		var out []string
		for _, m := range s.Moves {
			out = append(out, m.Pod.Name+" "+m.From+"->"+m.To)
		}
		return out
	}
	cli := plans[0].split
	if !slices.Equal(moves(cli), moves(manager)) || len(cli.Moves) != 2 || !maps.Equal(cli.Want, manager.Want) {
		t.Errorf("flotillactl plans %v (want %v), the manager %v (want %v)", moves(cli), cli.Want, moves(manager), manager.Want)
	}
}

// rebalancePlanFields is a RebalancePlan document, by the names it promises.
type rebalancePlanFields struct {
	Kind        string `json:"kind"`
	Namespace   string `json:"namespace"`
	Selector    string `json:"selector"`
	Controllers []struct {
		Controller string         `json:"controller"`
		Now        map[string]int `json:"now"`
		Placement  map[string]int `json:"placement"`
		Moves      []struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
			From      string `json:"from"`
			To        string `json:"to"`
		} `json:"moves"`
		StaysForData []string `json:"staysForData"`
	} `json:"controllers"`
	Busy []string `json:"busy"`
}

// rebalance --dry-run -o json|yaml prints the moves as one document, the same in both formats,
// and evicts nothing.
func TestRebalanceDryRunPrintsThePlanAsOneDocument(t *testing.T) {
	primary := rebalanceFixture(t, 4)
	plan := func(output string) []byte {
		t.Helper()
		var out bytes.Buffer
		o := rebalanceOptions{dryRun: true, output: output, namespace: "shop", selector: "app=web", timeout: time.Minute, poll: time.Millisecond}
		if err := runRebalance(t.Context(), primary, o, &out); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	raw := plan("json")
	fields := exactKeys(t, "the RebalancePlan", raw, "kind", "namespace", "selector", "controllers", "busy")
	if string(fields["busy"]) != "[]" {
		t.Errorf("busy = %s, want []", fields["busy"])
	}
	var controllers []json.RawMessage
	if err := json.Unmarshal(fields["controllers"], &controllers); err != nil || len(controllers) != 1 {
		t.Fatalf("controllers = %s (%v)", fields["controllers"], err)
	}
	exactKeys(t, "a controller", controllers[0], "controller", "now", "placement", "moves", "staysForData")

	var fromJSON rebalancePlanFields
	if err := json.Unmarshal(raw, &fromJSON); err != nil {
		t.Fatal(err)
	}
	c := fromJSON.Controllers[0]
	var moves []string
	for _, m := range c.Moves {
		moves = append(moves, fmt.Sprintf("%s/%s %s->%s", m.Namespace, m.Name, m.From, m.To))
	}
	if fromJSON.Kind != "RebalancePlan" || fromJSON.Namespace != "shop" || fromJSON.Selector != "app=web" || c.Controller != "shop/replicaset web-rs" ||
		!maps.Equal(c.Now, map[string]int{"us": 4}) || !maps.Equal(c.Placement, map[string]int{"eu": 2, "us": 2}) ||
		!slices.Equal(moves, []string{"shop/web-3 us->eu", "shop/web-2 us->eu"}) || c.StaysForData == nil {
		t.Errorf("plan = %+v, moves %v\n%s", fromJSON, moves, raw)
	}
	var fromYAML rebalancePlanFields
	if err := yaml.Unmarshal(plan("yaml"), &fromYAML); err != nil || !reflect.DeepEqual(fromYAML, fromJSON) {
		t.Errorf("-o yaml says %+v (%v), -o json %+v", fromYAML, err, fromJSON)
	}
	var pods corev1.PodList
	if err := primary.List(t.Context(), &pods); err != nil || len(pods.Items) != 4 {
		t.Fatalf("a dry run evicted: %d pods left (%v)", len(pods.Items), err)
	}
}
