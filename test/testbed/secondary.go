package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// PodLogLine is what `kubectl logs` prints for any pod of a secondary (kwok serves this file).
func PodLogLine(cluster string) string { return "hello from a pod in " + cluster }

var kwokGroupVersion = schema.GroupVersion{Group: "kwok.x-k8s.io", Version: "v1alpha1"}

// kwokResources maps the kinds the bed creates to their (cluster-scoped) resources.
var kwokResources = map[string]string{"Stage": "stages", "ClusterLogs": "clusterlogs", "ClusterExec": "clusterexecs",
	"ClusterAttach": "clusterattaches", "ClusterPortForward": "clusterportforwards",
	"Metric": "metrics", "ClusterResourceUsage": "clusterresourceusages"}

// stageEdit is one change the bed makes to a kwok stage as `make tools` copied it: old must be
// there (a newer kwok that moved it fails the bed loudly rather than silently behaving otherwise).
type stageEdit struct {
	file, old, new string
}

// stageEdits returns the bed's changes to kwok's stages.
//   - pod-ready: each running container reports its resources, as a kubelet with in-place resize
//     does (the API server resizes only pods whose running containers report them).
//   - pod-complete: every pod that is not restarted forever completes, not only a Job's: a
//     delegate of a Job pod is owned by Flotilla in the secondary, not by a Job.
//   - pod-delete: a deleted pod goes after kwok's 1 s, as a container that exits on SIGTERM does.
//     kwok's own stage waits a random time up to the end of the grace period, as for a container
//     that ignores SIGTERM: with the default 30 s, deleting N pods took nearly 30 s, a cost every
//     spec and benchmark then measured instead of Flotilla. A pod annotated
//     pod-delete.stage.kwok.x-k8s.io/delay still waits that long.
//   - pod-create and pod-ready: their random part is startJitter (kwok's own is 5 s each).
func stageEdits(startJitter time.Duration) []stageEdit {
	jitter := func(d time.Duration) string {
		return fmt.Sprintf("    jitterDurationMilliseconds: %d\n", d.Milliseconds())
	}
	return []stageEdit{
		{"pod-ready.yaml", readyRestartCount, readyRestartCount + readyResources},
		{"pod-complete.yaml", jobOwnerRule, restartPolicyRule},
		{"pod-delete.yaml", deleteJitterToDeadline, ""},
		{"pod-create.yaml", jitter(kwokStartJitter), jitter(startJitter)},
		{"pod-ready.yaml", jitter(kwokStartJitter), jitter(startJitter)},
	}
}

// kwokStartJitter is the random part of kwok's pod-create and pod-ready delays.
const kwokStartJitter = 5 * time.Second

// jobOwnerRule is the selector term of kwok's pod-complete stage that limits it to Job pods.
const jobOwnerRule = `    - key: '.metadata.ownerReferences.[].kind'
      operator: 'In'
      values:
      - 'Job'
`

// restartPolicyRule replaces jobOwnerRule.
const restartPolicyRule = `    - key: '.spec.restartPolicy'
      operator: 'In'
      values:
      - 'Never'
      - 'OnFailure'
`

// deleteJitterToDeadline is the part of kwok's pod-delete stage that waits up to the deadline.
const deleteJitterToDeadline = `    jitterDurationFrom:
      expressionFrom: '.metadata.deletionTimestamp'
`

// readyRestartCount is a line of the container statuses kwok's pod-ready stage writes;
// readyResources follows it.
const (
	readyRestartCount = "        restartCount: 0\n"
	readyResources    = "        resources: {{ YAML $item.resources 5 }}\n"
)

// setUpSecondary loads kwok's stages (the cluster runs with the Stage CRD, which replaces the
// built-in ones), the ClusterLogs/ClusterExec that make `kubectl logs/exec` work on its pods, and
// the Metric and ClusterResourceUsage its metrics-server scrapes (metrics.go).
// It must run before any node or pod exists: a pod bound earlier stays Pending.
func setUpSecondary(ctx context.Context, c *Cluster, tools kwokctl, workDir string, startJitter time.Duration) error {
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return fmt.Errorf("building dynamic client for %s: %w", c.Name, err)
	}
	files, err := filepath.Glob(filepath.Join(tools.toolsDir, "stages", "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no kwok stages in %s/stages: run `make tools`", tools.toolsDir)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("reading stage %s: %w", f, err)
		}
		for _, e := range stageEdits(startJitter) {
			if e.file != filepath.Base(f) {
				continue
			}
			if !bytes.Contains(raw, []byte(e.old)) {
				return fmt.Errorf("stage %s no longer has %q, which this bed changes", f, e.old)
			}
			raw = bytes.Replace(raw, []byte(e.old), []byte(e.new), 1)
		}
		docs, err := decodeYAML(raw)
		if err != nil {
			return fmt.Errorf("decoding stage %s: %w", f, err)
		}
		objs = append(objs, docs...)
	}
	logDir := filepath.Join(workDir, c.Name)
	if err := os.MkdirAll(logDir, 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", logDir, err)
	}
	logFile := podOutputFile(workDir, c)
	// kwok serves logs in the CRI format only.
	line := fmt.Sprintf("%s stdout F %s\n", time.Now().UTC().Format(time.RFC3339Nano), PodLogLine(c.Name))
	if err := os.WriteFile(logFile, []byte(line), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", logFile, err)
	}
	objs = append(objs,
		kwokObject("ClusterLogs", "testbed-logs", map[string]any{
			"selector": map[string]any{},
			"logs":     []any{map[string]any{"containers": []any{}, "logsFile": logFile, "follow": true}},
		}),
		kwokObject("ClusterExec", "testbed-exec", map[string]any{
			"selector": map[string]any{},
			"execs":    []any{map[string]any{"containers": []any{}, "local": map[string]any{"workDir": os.TempDir()}}},
		}),
		kwokObject("ClusterAttach", "testbed-attach", map[string]any{
			"selector": map[string]any{},
			"attaches": []any{map[string]any{"containers": []any{}, "logsFile": logFile}},
		}),
	)
	usage, err := metricsObjects(tools.toolsDir)
	if err != nil {
		return err
	}
	objs = append(objs, usage...)
	for _, o := range objs {
		if err := createKwokObject(ctx, dyn, o); err != nil {
			return fmt.Errorf("cluster %s: %w", c.Name, err)
		}
	}
	return nil
}

func podOutputFile(workDir string, c *Cluster) string {
	return filepath.Join(workDir, c.Name, "pod.log")
}

// AppendPodOutput writes a line to what every container of a secondary prints: `kubectl logs`
// shows it, and `kubectl attach` streams it to callers attached at that moment.
func (b *Bed) AppendPodOutput(c *Cluster, line string) error {
	f, err := os.OpenFile(podOutputFile(b.WorkDir, c), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("opening the pod output of %s: %w", c.Name, err)
	}
	_, err = fmt.Fprintf(f, "%s stdout F %s\n", time.Now().UTC().Format(time.RFC3339Nano), line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing the pod output of %s: %w", c.Name, err)
	}
	return nil
}

// ForwardPorts makes every port of every pod of a secondary forward to address:port on this
// machine (kwok's ClusterPortForward), so that `kubectl port-forward` has something to reach.
func ForwardPorts(ctx context.Context, c *Cluster, address string, port int) error {
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return fmt.Errorf("building dynamic client for %s: %w", c.Name, err)
	}
	return createKwokObject(ctx, dyn, kwokObject("ClusterPortForward", "testbed-forward", map[string]any{
		"selector": map[string]any{},
		"forwards": []any{map[string]any{"target": map[string]any{"address": address, "port": int64(port)}}},
	}))
}

func kwokObject(kind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(kwokGroupVersion.WithKind(kind))
	u.SetName(name)
	return u
}

// createKwokObject creates a kwok object, retrying while its CRD is not served yet.
func createKwokObject(ctx context.Context, dyn dynamic.Interface, o *unstructured.Unstructured) error {
	resource, ok := kwokResources[o.GetKind()]
	if !ok || o.GroupVersionKind().GroupVersion() != kwokGroupVersion {
		return fmt.Errorf("unexpected object %s %s", o.GroupVersionKind(), o.GetName())
	}
	gvr := kwokGroupVersion.WithResource(resource)
	var last error
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, last = dyn.Resource(gvr).Create(ctx, o, metav1.CreateOptions{})
		switch {
		case last == nil, apierrors.IsAlreadyExists(last):
			return true, nil
		case apierrors.IsNotFound(last), meta.IsNoMatchError(last):
			return false, nil // the CRD is not established yet
		default:
			return false, last
		}
	})
	if err != nil {
		return fmt.Errorf("creating %s %s: %w (last: %w)", o.GetKind(), o.GetName(), err, last)
	}
	return nil
}

func decodeYAML(raw []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(obj) == 0 || strings.TrimSpace(fmt.Sprint(obj["kind"])) == "" {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
}
