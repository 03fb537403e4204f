package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/flotilla-dev/flotilla/internal/ociimage"
)

// TestAppImage is the bed's application image (test/testbed/testapp): an HTTP server that says
// which pod and node answer, logs each request, drains on SIGTERM, exits on request, and serves
// a readiness endpoint that can be flipped; with `sh -c` and `sh FILE` (> and >> redirections),
// echo, sleep, cat, env, printenv, hostname, true, false, mkdir, rm, chmod and `wget -qO- URL` as
// busybox has them, and `nslookup [-type=A|AAAA|SRV] NAME` against the pod's resolv.conf (the
// cluster DNS, dns.go). Real nodes import it; nothing is pulled. It is also the helper image of
// the secondaries' volume provisioner (localpath.go).
const TestAppImage = "testbed.local/testapp:1"

// testAppApplets are the names the testapp binary answers to in the image, as links in /bin.
var testAppApplets = []string{"sh", "echo", "sleep", "cat", "env", "printenv", "hostname", "true", "false", "tty", "spin", "ls", "test", "[", "wget", "mkdir", "rm", "chmod", "nslookup", "testapp"}

// BuildTestAppImage builds test/testbed/testapp, static, into TestAppImage and writes the image
// as a tarball in dir (for ImportImage); it returns the tarball's path.
func BuildTestAppImage(ctx context.Context, dir string) (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("locating test/testbed/testapp")
	}
	dir, err := filepath.Abs(dir) // the build runs in the program's folder
	if err != nil {
		return "", fmt.Errorf("locating %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("making %s: %w", dir, err)
	}
	bin := filepath.Join(dir, "testapp")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./testapp")
	build.Dir = filepath.Dir(file)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the testapp program: %w: %s", err, out)
	}
	links := make([]string, 0, len(testAppApplets))
	for _, a := range testAppApplets {
		links = append(links, "/bin/"+a)
	}
	platform := "linux/" + runtime.GOARCH
	tar := filepath.Join(dir, "testapp.tar")
	spec := ociimage.Spec{Ref: TestAppImage, Entrypoint: "/testapp", User: "65532:65532", Binaries: map[string]string{platform: bin},
		Links: links, Env: []string{"PATH=/bin"}}
	if err := ociimage.WriteTarball(spec, platform, tar); err != nil {
		return "", fmt.Errorf("writing the testapp image: %w", err)
	}
	return tar, nil
}
