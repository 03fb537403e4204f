package testbed

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestFakeNodeCarriesTopologyAndCapacity(t *testing.T) {
	size := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
	tests := []struct {
		cluster  string
		i        int
		wantName string
		wantZone string
	}{
		{"secondary1", 0, "secondary1-node-0", "region-secondary1-a"},
		{"secondary2", 1, "secondary2-node-1", "region-secondary2-b"},
	}
	for _, tc := range tests {
		t.Run(tc.wantName, func(t *testing.T) {
			n := fakeNode(tc.cluster, tc.i, size)
			if n.Name != tc.wantName {
				t.Errorf("name = %s, want %s", n.Name, tc.wantName)
			}
			if n.Annotations[FakeNodeAnnotation] != "fake" {
				t.Errorf("missing kwok annotation: %v", n.Annotations)
			}
			if got := n.Labels["topology.kubernetes.io/zone"]; got != tc.wantZone {
				t.Errorf("zone = %s, want %s", got, tc.wantZone)
			}
			if got := n.Labels["topology.kubernetes.io/region"]; got != Region(tc.cluster) {
				t.Errorf("region = %s, want %s", got, Region(tc.cluster))
			}
			if !n.Status.Allocatable.Cpu().Equal(resource.MustParse("8")) {
				t.Errorf("allocatable cpu = %s", n.Status.Allocatable.Cpu())
			}
		})
	}
}

func TestNodeSizeRejectsBadQuantities(t *testing.T) {
	s := NodeSize{CPU: "lots"}
	s.defaults()
	if _, err := s.resources(); err == nil {
		t.Fatal("want an error for cpu \"lots\"")
	}
}

// The bed's pod-complete stage must complete any Never/OnFailure pod, not only Job pods.
func TestPodCompleteStageRuleIsReplaced(t *testing.T) {
	stage := []byte("spec:\n  selector:\n    matchExpressions:\n" + jobOwnerRule)
	out := bytes.Replace(stage, []byte(jobOwnerRule), []byte(restartPolicyRule), 1)
	objs, err := decodeYAML(append([]byte("kind: Stage\n"), out...))
	if err != nil {
		t.Fatal(err)
	}
	exprs := objs[0].Object["spec"].(map[string]any)["selector"].(map[string]any)["matchExpressions"].([]any)
	rule := exprs[0].(map[string]any)
	if rule["key"] != ".spec.restartPolicy" {
		t.Errorf("rule key = %v", rule["key"])
	}
	if vals := rule["values"].([]any); len(vals) != 2 || vals[0] != "Never" || vals[1] != "OnFailure" {
		t.Errorf("rule values = %v", vals)
	}
}

func TestDecodeYAMLSkipsEmptyDocuments(t *testing.T) {
	objs, err := decodeYAML([]byte("---\nkind: Stage\nmetadata: {name: a}\n---\n---\nkind: Stage\nmetadata: {name: b}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].GetName() != "a" || objs[1].GetName() != "b" {
		t.Fatalf("decoded %d objects: %v", len(objs), objs)
	}
}

func TestProcessStopEndsItByPID(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	p, err := StartProcess("sleep", sleep, []string{"60"}, filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	if !ProcessAlive(p.PID()) {
		t.Fatal("process not alive after start")
	}
	if err := p.Stop(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	if ProcessAlive(p.PID()) || !p.Exited() {
		t.Fatal("process alive after Stop")
	}
}

func TestKillAndWaitEndsAProcessThatIgnoresSIGTERM(t *testing.T) {
	cmd := exec.Command("bash", "-c", "trap '' TERM; sleep 60")
	if err := cmd.Start(); err != nil {
		t.Skip("no bash:", err)
	}
	go func() { _ = cmd.Wait() }() // reap it, as init would for kwokctl's detached processes
	time.Sleep(200 * time.Millisecond)
	if left := killAndWait([]int{cmd.Process.Pid}, 500*time.Millisecond); len(left) != 0 {
		t.Fatalf("still alive: %v", left)
	}
}

func TestReadPIDsReadsKwokctlPIDFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "pids"), 0o750); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"etcd.pid": "123\n", "kwok.pid": "456", "bad.pid": "x", "one.pid": "1"} {
		if err := os.WriteFile(filepath.Join(dir, "pids", name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got := readPIDs(dir)
	if len(got) != 2 {
		t.Fatalf("readPIDs = %v, want 123 and 456", got)
	}
}

func TestOrderExtraArgsPutsEachComponentsFirstArgFirst(t *testing.T) {
	got := orderExtraArgs([]string{"a=1=x", "a=2=y", "b=1=z", "c=1=w", "b=2=v", "a=3=u"})
	want := []string{"a=1=x", "b=1=z", "c=1=w", "a=2=y", "b=2=v", "a=3=u"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}
