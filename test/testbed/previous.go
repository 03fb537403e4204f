package testbed

import (
	"fmt"
	"os"
	"path/filepath"
)

// PreviousRelease is Flotilla's previous release as `make tools` (set previous) builds it from this
// repository's history: its version, the commit it was built from, its manager binary and its chart.
type PreviousRelease struct {
	Version, Commit string
	ManagerBin      string
	Chart           string
}

// Previous finds the previous release in the tools folder (toolsDir, else the default), naming the
// set to build when it is missing.
func Previous(toolsDir string) (PreviousRelease, error) {
	dir, err := ToolsDir(toolsDir)
	if err != nil {
		return PreviousRelease{}, err
	}
	version, err := toolVersion("FLOTILLA_PREVIOUS_RELEASE")
	if err != nil {
		return PreviousRelease{}, err
	}
	commit, err := toolVersion("FLOTILLA_PREVIOUS_COMMIT")
	if err != nil {
		return PreviousRelease{}, err
	}
	if len(commit) < 12 {
		return PreviousRelease{}, fmt.Errorf("FLOTILLA_PREVIOUS_COMMIT %q is not a commit hash", commit)
	}
	home := filepath.Join(dir, "flotilla-"+version+"-"+commit[:12])
	r := PreviousRelease{Version: version, Commit: commit,
		ManagerBin: filepath.Join(home, "flotilla-manager"), Chart: filepath.Join(home, "flotilla")}
	for _, f := range []string{r.ManagerBin, filepath.Join(r.Chart, "Chart.yaml")} {
		if _, err := os.Stat(f); err != nil {
			return PreviousRelease{}, fmt.Errorf("the previous release of Flotilla (%s) is not built (test/tools/install.sh previous): %w", version, err)
		}
	}
	return r, nil
}
