package testbed

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// KubeVersionsEnv names the Kubernetes version of each cluster the bed starts, as
// "primary=v1.37.2,secondary1=v1.34.4"; "default" alone runs every cluster on test/tools'
// KUBE_VERSION. Unset: DefaultKubeVersions.
const KubeVersionsEnv = "FLOTILLA_BED_VERSIONS"

// DefaultKubeVersions is the bed's mix: the primary on the newest minor, secondary1 on the oldest
// Flotilla supports, secondary2 (and any further one) on test/tools' KUBE_VERSION, between them,
// so that every spec runs across the skew. A cluster not named runs KUBE_VERSION.
var DefaultKubeVersions = map[string]string{PrimaryName: "v1.37.2", "secondary1": "v1.34.4"}

// OppositeKubeVersions is the mix the other way round: the primary older than a secondary
// (KUBE_VERSION, two minors behind secondary1 on the newest), secondary2 on the oldest. The e2e
// suite's bed without real nodes runs it.
var OppositeKubeVersions = map[string]string{"secondary1": "v1.37.2", "secondary2": "v1.34.4"}

// kubeVersions is the version of each cluster the options name: opts.KubeVersions, else
// $FLOTILLA_BED_VERSIONS, else DefaultKubeVersions. A version the tools were not built for
// (test/tools/versions.env: KUBE_VERSION, KUBE_OTHER_VERSIONS) is an error naming them.
func kubeVersions(opts Options, toolsDir string) (map[string]string, error) {
	versions := opts.KubeVersions
	if versions == nil {
		parsed, err := ParseKubeVersions(os.Getenv(KubeVersionsEnv))
		if err != nil {
			return nil, fmt.Errorf("$%s: %w", KubeVersionsEnv, err)
		}
		versions = parsed
	}
	if versions == nil {
		versions = DefaultKubeVersions
	}
	for _, name := range slices.Sorted(maps.Keys(versions)) {
		if _, err := kubeBinary(toolsDir, "kube-apiserver", versions[name]); err != nil {
			return nil, fmt.Errorf("cluster %s on Kubernetes %s: %w", name, versions[name], err)
		}
	}
	return versions, nil
}

// ParseKubeVersions reads "cluster=version,..." ("" is nil: the default mix; "default" is an
// empty map: every cluster on KUBE_VERSION).
func ParseKubeVersions(s string) (map[string]string, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "":
		return nil, nil
	case "default":
		return map[string]string{}, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		name, version, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || name == "" || !strings.HasPrefix(version, "v1.") {
			return nil, fmt.Errorf("%q is not cluster=v1.MINOR.PATCH", kv)
		}
		out[name] = version
	}
	return out, nil
}

// kubeBinary is the path of a Kubernetes binary of version v in the tools folder: name itself for
// KUBE_VERSION (or ""), name-v for another version, which test/tools builds for each of
// KUBE_OTHER_VERSIONS.
func kubeBinary(toolsDir, name, v string) (string, error) {
	def, err := toolVersion("KUBE_VERSION")
	if err != nil {
		return "", err
	}
	if v == "" || v == def {
		return filepath.Join(toolsDir, name), nil
	}
	path := filepath.Join(toolsDir, name+"-"+v)
	if _, err := os.Stat(path); err != nil {
		others, _ := toolVersion("KUBE_OTHER_VERSIONS")
		return "", fmt.Errorf("no %s %s in %s: the bed runs Kubernetes %s (KUBE_VERSION) and %s (KUBE_OTHER_VERSIONS in test/tools/versions.env; `make tools` builds them)",
			name, v, toolsDir, def, others)
	}
	return path, nil
}

// nodeBinary is a real node's kubelet or kube-proxy for a cluster on Kubernetes v: that version's
// where test/tools builds one (its module has a kubelet), else KUBE_VERSION's, which a newer
// control plane accepts (a kubelet may be up to three minors older than its API server).
func nodeBinary(toolsDir, name, v string) string {
	if path, err := kubeBinary(toolsDir, name, v); err == nil {
		return path
	}
	return filepath.Join(toolsDir, name)
}

// DefaultKubeVersion is test/tools' KUBE_VERSION: the version of a cluster the bed's versions do
// not name, and of the bed's Go libraries.
func DefaultKubeVersion() (string, error) { return toolVersion("KUBE_VERSION") }

// MinorOf is the minor of a version v1.MINOR.PATCH (0 when it does not parse).
func MinorOf(v string) int {
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(parts[1])
	return n
}
