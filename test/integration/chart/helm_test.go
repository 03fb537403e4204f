package chart_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/integration/clusterenv"
)

// chartDir is the repository's chart.
var chartDir = filepath.Join(clusterenv.RepoRoot(), "charts", "flotilla")

// helmHome is the helm home of `helm template` (set by BeforeSuite).
var helmHome string

// helmTimeout bounds every helm command.
const helmTimeout = 2 * time.Minute

// runHelm runs the tools directory's helm with a home of its own under home (no user's
// repositories or plugins) and returns its combined output.
func runHelm(ctx context.Context, home string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, helmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(os.Getenv("FLOTILLA_TOOLS_DIR"), "helm"), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// oldestKubernetes is the oldest Kubernetes the chart installs on (its kubeVersion).
const oldestKubernetes = "1.34.0"

// helmTemplate renders the chart in flotilla-system with more helm arguments (--set, --set-json,
// --api-versions): the objects, or helm's output and error.
func helmTemplate(ctx context.Context, args ...string) ([]*unstructured.Unstructured, string, error) {
	// helm template assumes Kubernetes 1.20 unless told: the oldest minor the chart takes.
	full := append([]string{"template", "flotilla", chartDir, "-n", flotillav1.SystemNamespace, "--kube-version", oldestKubernetes}, args...)
	out, err := runHelm(ctx, helmHome, full...)
	if err != nil {
		return nil, out, fmt.Errorf("helm template: %w", err)
	}
	objs, err := decode(out)
	return objs, out, err
}

// render runs `helm template` on the chart with the given --set values; it must succeed.
func render(ctx context.Context, sets ...string) []*unstructured.Unstructured {
	var args []string
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	objs, out, err := helmTemplate(ctx, args...)
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), "%s", out)
	return objs
}

// decode splits a multi-document YAML stream into objects, skipping empty documents.
func decode(stream string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(stream)), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decoding helm's output: %w", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// find returns the object of that kind and name, or nil.
func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// ofKind returns the names of the objects of that kind.
func ofKind(objs []*unstructured.Unstructured, kind string) []string {
	var names []string
	for _, o := range objs {
		if o.GetKind() == kind {
			names = append(names, o.GetName())
		}
	}
	return names
}

// managerDeployment is the rendered manager Deployment; it must be there.
func managerDeployment(objs []*unstructured.Unstructured) *appsv1.Deployment {
	u := find(objs, "Deployment", "flotilla-manager")
	ExpectWithOffset(1, u).NotTo(BeNil(), "no Deployment flotilla-manager")
	d := &appsv1.Deployment{}
	ExpectWithOffset(1, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d)).To(Succeed())
	return d
}

// copyChart copies the chart's files to dir.
func copyChart(dir string) error {
	return filepath.WalkDir(chartDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(chartDir, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), raw, 0o644)
	})
}
