package testbed

import (
	"fmt"
	"os"
	"path/filepath"
)

// clusterInventoryVersionKey is CLUSTER_INVENTORY_VERSION in test/tools/versions.env.
const clusterInventoryVersionKey = "CLUSTER_INVENTORY_VERSION"

// InventoryFiles are the cluster inventory API's ClusterProfile CRD and its secretreader access
// provider plugin, as `make tools` (set inventory) caches them: a reader of ClusterProfiles uses
// them as MultiKueue does.
func InventoryFiles(toolsDir string) (crd, plugin string, err error) {
	dir, err := ToolsDir(toolsDir)
	if err != nil {
		return "", "", err
	}
	version, err := toolVersion(clusterInventoryVersionKey)
	if err != nil {
		return "", "", err
	}
	crd = filepath.Join(dir, "clusterprofiles-"+version+".yaml")
	plugin = filepath.Join(dir, "secretreader-plugin-"+version)
	for _, f := range []string{crd, plugin} {
		if _, err := os.Stat(f); err != nil {
			return "", "", fmt.Errorf("the cluster inventory API's %s is not built (test/tools/install.sh inventory): %w", filepath.Base(f), err)
		}
	}
	return crd, plugin, nil
}
