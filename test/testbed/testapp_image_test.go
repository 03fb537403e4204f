package testbed

import (
	archivetar "archive/tar"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The application image needs no root and no node: it is built and read back here.
func TestBuildTestAppImage(t *testing.T) {
	tar, err := BuildTestAppImage(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(tar, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Config.Entrypoint, " ") != "/testapp" || strings.Join(cfg.Config.Env, " ") != "PATH=/bin" || cfg.Config.User != "65532:65532" {
		t.Errorf("config: entrypoint %q env %q user %q", cfg.Config.Entrypoint, cfg.Config.Env, cfg.Config.User)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	links := map[string]string{}
	tr := archivetar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == archivetar.TypeSymlink {
			links[h.Name] = h.Linkname
		}
	}
	for _, a := range []string{"sh", "sleep", "echo"} {
		if links["bin/"+a] != "/testapp" {
			t.Errorf("bin/%s -> %q, want /testapp", a, links["bin/"+a])
		}
	}
}

// FreePort hands out ports below the kernel's ephemeral range, each once.
func TestFreePortIsBelowTheEphemeralRangeAndNeverTwice(t *testing.T) {
	low, _ := ephemeralPorts()
	seen := map[int]bool{}
	for range 50 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < freePortFloor || p >= low || seen[p] {
			t.Fatalf("port %d: want one in [%d, %d), not given before", p, freePortFloor, low)
		}
		seen[p] = true
	}
}
