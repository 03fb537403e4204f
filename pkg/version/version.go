package version

import (
	"fmt"
	"runtime"
)

// Set at link time; the defaults say the binary was built without the Makefile.
var (
	version = "v0.0.0-dev"
	commit  = "unknown"
)

// Info is what a binary reports about its build.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the build's Info.
func Get() Info {
	return Info{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
}

// String is the one-line form, e.g. "v0.1.0 (commit abc123, go1.26.8, linux/amd64)".
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, %s, %s)", i.Version, i.Commit, i.GoVersion, i.Platform)
}
