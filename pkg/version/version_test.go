package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestGetReportsBuildAndPlatform(t *testing.T) {
	i := Get()
	if i.Version == "" || i.Commit == "" {
		t.Fatalf("empty version or commit: %+v", i)
	}
	if i.GoVersion != runtime.Version() {
		t.Errorf("GoVersion = %q, want %q", i.GoVersion, runtime.Version())
	}
	s := i.String()
	for _, want := range []string{i.Version, "commit " + i.Commit, runtime.GOOS + "/" + runtime.GOARCH} {
		if !strings.Contains(s, want) {
			t.Errorf("String() = %q, missing %q", s, want)
		}
	}
}
